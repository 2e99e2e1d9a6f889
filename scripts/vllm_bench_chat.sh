#!/usr/bin/env bash
# vLLM's own load tool (`vllm bench serve`, OpenAI chat backend, random images) against our chat
# API, unchanged (issue 12; docs/generation.md "Driven by vLLM's load tool"). Starts the default
# app plus the VLM (serve_config.vlm.yaml) on :8000, runs the tool, stops the server by its pid.
# Usage: scripts/vllm_bench_chat.sh [extra `vllm bench serve` flags]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export RAY_AUTH_MODE=disabled
.venv/bin/python -m app.builder serve_config.vlm.yaml >/dev/null 2>&1  # trains the VLM if needed
model_dir=$(.venv/bin/python -c "from deployments.models.vlm import ensure_vlm; print(ensure_vlm())")
mkdir -p results
bash scripts/serve.sh serve_config.vlm.yaml > results/vllm_bench_chat_server.log 2>&1 &
server=$!
trap 'kill -INT $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  curl -sf localhost:8000/v1/models 2>/dev/null | grep -q '"vlm"' && break
  sleep 1
done
.venv/bin/python -m app.bench.gen_vllm_cli bench serve --backend openai-chat \
  --base-url http://127.0.0.1:8000 --endpoint /v1/chat/completions --model vlm \
  --tokenizer "$model_dir" --dataset-name random-mm --num-prompts 200 --request-rate 8 \
  --random-input-len 16 --random-output-len 4 --random-range-ratio 0 \
  --random-mm-base-items-per-request 2 --random-mm-num-mm-items-range-ratio 1 \
  --random-mm-limit-mm-per-prompt '{"image": 4, "video": 0}' \
  --random-mm-bucket-config '{(56, 56, 1): 1.0}' --seed 0 "$@"
