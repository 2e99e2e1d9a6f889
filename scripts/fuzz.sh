#!/usr/bin/env bash
# Fuzz the HTTP API with schemathesis against a real local Ray Serve of the default app
# (bench/experiments/fuzz/run.py; checks in schemathesis.toml). Time-bounded: --max-time-s (default 180 s
# of fuzzing, plus the server's start). Exit status 0 only when no check failed.
# Usage: scripts/fuzz.sh [--max-time-s N] [--seed N] [--port N]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export RAY_AUTH_MODE=disabled
exec .venv/bin/python -m bench fuzz "$@"
