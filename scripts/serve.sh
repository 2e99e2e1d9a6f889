#!/usr/bin/env bash
# Start the adaptserve HTTP API on :8000 (Ray Serve). Trains, profiles and plans on first use
# (cached under .cache/), then `serve run serve_config.yaml` in the foreground (Ctrl-C stops it).
# Usage: scripts/serve.sh [serve_config.yaml] [extra `serve run` flags]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export RAY_AUTH_MODE=disabled
config="${1:-serve_config.yaml}"
shift || true
.venv/bin/python -m app.builder "$config"
exec .venv/bin/serve run "$config" "$@"
