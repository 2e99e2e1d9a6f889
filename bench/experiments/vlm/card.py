"""The VLM's model card figures: held-out accuracy per task and the stage costs (torch).

    .venv/bin/python -m bench vlm-card [--threads 1] [--repeats 15] [--out docs/data_vlm.json]

Trains the model first if the cache has none (deployments/models/vlm, `ensure_vlm`), then
measures on this machine: exact-match accuracy of transformers' greedy answers on every
held-out example, sequence accuracy per image count, and the stage costs (image encoder per
batch, decoder prefill per prompt, decode step per batch, the encoder's share of TTFT). Writes
the JSON (with vLLM's figures from docs/data_vlm_vllm.json when python -m bench vlm-vllm-check has
written them) and prints the tables docs/vlm.md shows.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from bench.core.cli import experiment_parser, settings_of
from bench.core.result import Run, read_result
from deployments.models.vlm import VlmConfig, ensure_vlm, load_model, read_meta
from deployments.models.vlm.costs import measure_stage_costs
from deployments.models.vlm.evaluate import held_out_accuracy, sequence_accuracy_by_count
from deployments.models.vlm.tokenizer import build_tokenizer

VLLM_JSON = Path("docs/data_vlm_vllm.json")


def _sizes(model: Any) -> dict[str, int]:
    tower = sum(p.numel() for p in model.model.vision_tower.parameters())
    projector = sum(p.numel() for p in model.model.multi_modal_projector.parameters())
    decoder = sum(p.numel() for p in model.model.language_model.parameters())
    decoder += sum(p.numel() for p in model.lm_head.parameters())
    return {"vision_tower": tower, "projector": projector, "decoder": decoder,
            "total": tower + projector + decoder}


def tables(result: dict[str, Any]) -> str:
    acc, costs = result["held_out_accuracy"], result["stage_costs_torch"]
    lines = ["| task | held-out examples | exact match |", "|---|---|---|"]
    for task, value in acc.items():
        lines.append(f"| {task} | {result['held_out_examples'][task]} | {value:.3f} |")
    lines += ["", "| images | " + " | ".join(str(n) for n in result["sequence_by_count"]) + " |",
              "|---" * (len(result["sequence_by_count"]) + 1) + "|",
              "| sequence exact match | " + " | ".join(
                  f"{v:.2f}" for v in result["sequence_by_count"].values()) + " |", ""]
    enc = costs["encoder_ms"]
    lines += ["| encoder batch (images) | " + " | ".join(str(b) for b in enc) + " |",
              "|---" * (len(enc) + 1) + "|",
              "| ms per batch | " + " | ".join(f"{v:.2f}" for v in enc.values()) + " |",
              "| ms per image | " + " | ".join(
                  f"{v / int(b):.2f}" for b, v in enc.items()) + " |", ""]
    lines += ["| prompt (images) | tokens | prefill ms | encode its images ms |"
              " encoder share of TTFT |", "|---|---|---|---|---|"]
    for n, ms in costs["prefill_ms"].items():
        share = costs["encoder_share_of_ttft"].get(n)
        enc_ms = enc.get(n)
        lines.append(f"| {n} | {costs['prefill_tokens'][n]} | {ms:.2f} | "
                     f"{'' if enc_ms is None else f'{enc_ms:.2f}'} | "
                     f"{'' if share is None else f'{share:.0%}'} |")
    dec = costs["decode_step_ms"]
    lines += ["", "| decode batch | " + " | ".join(str(b) for b in dec) + " |",
              "|---" * (len(dec) + 1) + "|",
              "| ms per step | " + " | ".join(f"{v:.2f}" for v in dec.values()) + " |",
              "| ms per token | " + " | ".join(
                  f"{v / int(b):.3f}" for b, v in dec.items()) + " |"]
    pre = costs["prefill_batch_ms"]
    lines += ["", "| prefill batch (4-image prompts) | " + " | ".join(str(b) for b in pre)
              + " |", "|---" * (len(pre) + 1) + "|",
              "| ms per request | " + " | ".join(
                  f"{v / int(b):.2f}" for b, v in pre.items()) + " |"]
    return "\n".join(lines + _vllm_lines(result.get("vllm"))) + "\n"


def _vllm_lines(vllm: dict[str, Any] | None) -> list[str]:
    if not vllm:
        return []
    ttft = vllm["ttft_ms"]
    lines = ["", "| vLLM, one request: images | TTFT from pixels (monolith) ms |"
             " TTFT from embeddings (LLM stage) ms | encoding share |", "|---|---|---|---|"]
    for n in (0, 1, 4, 8):
        pix, emb = ttft[f"pixels_{n}"], ttft[f"embeds_{n}"]
        share = f"{(pix - emb) / pix:.0%}" if n else ""
        lines.append(f"| {n} | {pix:.2f} | {emb:.2f} | {share} |")
    dec = vllm["decode_step_ms"]
    lines += ["", "| vLLM decode batch | " + " | ".join(str(b) for b in dec) + " |",
              "|---" * (len(dec) + 1) + "|",
              "| ms per step | " + " | ".join(f"{v:.2f}" for v in dec.values()) + " |"]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = experiment_parser(__doc__, out="docs/data_vlm.json")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15,
                        help="timed repeats of each stage cost (median)")
    args = parser.parse_args(argv)
    run = Run()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    torch.set_num_threads(args.threads)
    cfg = VlmConfig()
    model_dir = ensure_vlm(cfg=cfg)
    model, tok = load_model(model_dir), build_tokenizer()
    from deployments.models.vlm.data import test_examples

    result: dict[str, Any] = {
        "model_dir": str(model_dir), "config": cfg.to_dict(), "parameters": _sizes(model),
        "training": {k: v for k, v in (read_meta(model_dir) or {}).items()
                     if k not in ("config", "weights_digest")},
        "held_out_examples": {t: len(e) for t, e in test_examples(cfg.data).items()},
        "held_out_accuracy": held_out_accuracy(model, tok, cfg),
        "sequence_by_count": sequence_accuracy_by_count(model, tok, cfg),
        "stage_costs_torch": asdict(measure_stage_costs(model, tok, cfg, args.repeats)),
        "load_average_1m": round(os.getloadavg()[0], 2)}
    if VLLM_JSON.is_file():
        result["vllm"] = read_result(VLLM_JSON)["data"].get("vllm_costs")
    plain = json.loads(json.dumps(result, default=str))
    run.write(args.out, plain, settings=settings_of(args))
    sys.stdout.write(tables(plain))
    return 0
