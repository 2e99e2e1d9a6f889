#!/usr/bin/env bash
# The README's test command: installs what is missing, then runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest tests "$@"
