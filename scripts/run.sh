#!/usr/bin/env bash
# The README's main job. Until the serving app exists this is the RAMSIS reproduction:
# plan policies from the paper's profiles and simulate the three policies side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/adaptserve simulate --workers 60 --slo-ms 150 --trace constant --qps 2000 \
  --policies ramsis,jellyfish,modelswitching --out results/main "$@"
