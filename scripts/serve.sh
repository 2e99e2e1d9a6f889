#!/usr/bin/env bash
# Start the adaptserve HTTP API on :8000 (Ray Serve). Trains, profiles and plans on first use
# (cached under .cache/), then `serve run serve_config.yaml` in the foreground (Ctrl-C stops it).
# Usage: scripts/serve.sh [serve_config.yaml] [extra `serve run` flags]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export RAY_AUTH_MODE=disabled
# Serve's throughput settings (deployments/config.py CLUSTER_ENV; docs/serving.md "Request path")
# and the front door's admission middleware in the HTTP proxy (deployments/ingress/proxy/front_door.py)
export RAY_SERVE_PROXY_USE_GRPC=1 RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD=0 \
  RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=0 RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH=67108864 \
  RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=deployments.ingress.proxy.front_door:proxy_middlewares
config="${1:-serve_config.yaml}"
shift || true
.venv/bin/python -m app.builder "$config"
exec .venv/bin/serve run "$config" "$@"
