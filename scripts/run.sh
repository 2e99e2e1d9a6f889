#!/usr/bin/env bash
# The README's main job: the adaptserve HTTP API on :8000, serving the default models
# (trained, profiled and planned on first start, cached under .cache/). Ctrl-C stops it.
set -euo pipefail
exec bash "$(dirname "$0")/serve.sh" "$@"
