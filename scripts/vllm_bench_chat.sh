#!/usr/bin/env bash
# vLLM's own load tool (`vllm bench serve`, OpenAI chat backend, random images) against our chat
# API, unchanged (docs/generation.md "Driven by vLLM's load tool"). Starts the default
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
stop() {  # serve run shuts Serve and Ray down on SIGINT; SIGTERM if it has not within 30 s
  kill -INT "$server" 2>/dev/null || return 0
  for _ in $(seq 30); do kill -0 "$server" 2>/dev/null || return 0; sleep 1; done
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
}
trap stop EXIT
ready=0  # the stages (the vLLM engine) start after the ingress: wait for a real answer
for _ in $(seq 120); do
  if curl -sf localhost:8000/v1/chat/completions -H 'Content-Type: application/json' \
       -d '{"model": "vlm", "max_tokens": 2, "messages": [{"role": "user", "content": "what is two plus three?"}]}' \
       >/dev/null 2>&1; then ready=1; break; fi
  sleep 3
done
[ "$ready" = 1 ] || { echo "the chat API did not answer within 6 min" >&2; exit 1; }
.venv/bin/python -m bench.experiments.generation_systems.vllm_cli bench serve --backend openai-chat \
  --base-url http://127.0.0.1:8000 --endpoint /v1/chat/completions --model vlm \
  --tokenizer "$model_dir" --dataset-name random-mm --num-prompts 200 --request-rate 8 \
  --random-input-len 16 --random-output-len 4 --random-range-ratio 0 \
  --random-mm-base-items-per-request 2 --random-mm-num-mm-items-range-ratio 1 \
  --random-mm-limit-mm-per-prompt '{"image": 4, "video": 0}' \
  --random-mm-bucket-config '{(56, 56, 1): 1.0}' --seed 0 "$@"
