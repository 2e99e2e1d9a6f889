"""Post one real /v1/classify request (a held-out example of a family) and print the answer.

Usage: .venv/bin/python scripts/example_request.py [--url http://127.0.0.1:8000] [--model family]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.core.http import post_json
from deployments.models.cache import DEFAULT_MODELS_DIR
from deployments.models.registry import load_model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--model", default="family", choices=["family", "vit", "fusion"])
    parser.add_argument("--slo-ms", type=float, default=200.0)
    parser.add_argument("--models-dir", type=Path, default=DEFAULT_MODELS_DIR)
    args = parser.parse_args()
    model = load_model(args.model, args.models_dir)
    task = model.tasks()[0]
    example = model.examples("test", task, limit=1)[0]
    body = {"model": args.model, "task": task, "inputs": example.inputs,
            "slo": {"latency_ms": args.slo_ms}}
    answer = post_json(f"{args.url}/v1/classify", body, timeout_s=30.0)
    print(f"HTTP {answer.status_code}; true label {example.label}")
    print(json.dumps(answer.json(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
