"""`python -m bench adapter-startup`: for each architecture adapter, on a tiny model directory
built here (no download), our app (monolith, vLLM engine, no classifier) beside plain
`vllm serve` on the same directory, alternately, same run:

- start time: from launching the server's process to its health route answering 200 (ours:
  Ray, Serve, the build and every replica; vLLM: its API server and engine);
- idle TTFT: one streaming chat request at a time on the idle server (after one warm-up),
  from the send to the first content chunk (an empty answer: its finishing chunk); the median
  of `--requests`.

The same engine settings for both (bench/experiments/generation_systems/systems.py's budget).
Prints a table and writes a Result."""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image

from bench.core.result import Check, Run
from bench.core.wait import http_ok
from bench.experiments.generation_systems.systems import (
    EngineBudget,
    Running,
    SystemSpec,
    log_tail,
    start,
    stop,
)

TILED = ("llava_next", "llava_onevision")
SYSTEMS = {"adaptserve": ("monolith", "/healthz"), "vllm-serve": ("vllm-serve", "/health")}


def tiny_dirs(root: Path, adapters: list[str]) -> dict[str, Path]:
    """A tiny model directory per adapter: the tiny LLaVA (`TINY_VLM`, trained in seconds), its
    language model exported as a Llama directory (text only), a random-init Qwen2-VL,
    LLaVA-NeXT and LLaVA-OneVision."""
    from deployments.models.vlm.cache import ensure_vlm
    from deployments.models.vlm.config import TINY_VLM
    from deployments.models.vlm.language_model import export_language_model
    from deployments.models.vlm.tiny_llava_tiled import build_tiny_llava_tiled
    from deployments.models.vlm.tiny_qwen_vl import build_tiny_qwen_vl

    llava = ensure_vlm(root / "llava", TINY_VLM)
    out = {"llava": llava, "llama": export_language_model(llava, root / "llama"),
           "qwen2_vl": build_tiny_qwen_vl(root / "qwen2_vl"),
           **{t: build_tiny_llava_tiled(root / t, t) for t in TILED}}
    unknown = [a for a in adapters if a not in out]
    if unknown:
        raise SystemExit(f"no tiny model for {unknown}; valid: {sorted(out)}")
    return {a: out[a] for a in adapters}


def png_url() -> str:
    buf = io.BytesIO()
    Image.new("RGB", (28, 28), (255, 255, 255)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def chat_body(adapter: str) -> dict[str, Any]:
    content: Any = "what is 2 + 3?"
    if adapter != "llama":  # the tiny Qwen2-VL's word-level tokenizer knows these words
        content = [{"type": "image_url", "image_url": {"url": png_url()}},
                   {"type": "text", "text": "which digit is this ?"}]
    return {"model": "tiny", "max_tokens": 4, "stream": True,
            "messages": [{"role": "user", "content": content}]}


def wait_ready(run: Running, url: str, timeout_s: float = 600.0) -> float:
    """Seconds from the process's launch to `url` answering 200; an exit first is an error
    with the log's tail."""
    while time.time() - run.started_s < timeout_s:
        if http_ok(url):
            return time.time() - run.started_s
        if run.proc.poll() is not None:
            raise RuntimeError(f"{run.spec.name} exited: {log_tail(run)}")
        time.sleep(0.25)
    raise TimeoutError(f"{run.spec.name}: {url} not up after {timeout_s:g} s")


async def _ttft_ms(url: str, body: dict[str, Any]) -> float:
    import aiohttp

    t = time.perf_counter()
    async with aiohttp.ClientSession() as session, session.post(
            url + "/v1/chat/completions", json=body,
            timeout=aiohttp.ClientTimeout(total=120)) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}: {(await resp.text())[:300]}")
        async for line in resp.content:
            text = line.decode().strip()
            if text.startswith("data:") and text != "data: [DONE]":
                choice = json.loads(text[5:])["choices"][0]
                # the first content chunk (an empty answer: its finishing chunk)
                if choice.get("delta", {}).get("content") or choice.get("finish_reason"):
                    return (time.perf_counter() - t) * 1000.0
    raise RuntimeError(f"{url}: the stream ended without content")


def measure(system: str, adapter: str, model_dir: Path, port: int, requests: int,
            work: Path) -> dict[str, Any]:
    kind, health = SYSTEMS[system]
    config = work / "serve_config.yaml"
    config.write_text(json.dumps({"applications": [{"args": {"classifiers": []}}]}))
    spec = SystemSpec(kind, port, str(model_dir), "tiny",
                      # the tiled models' largest image takes 288 tokens: vLLM profiles it
                      EngineBudget(max_model_len=512 if adapter in TILED else 256,
                                   max_images=1, max_num_seqs=4),
                      slo_ms=10_000.0, config=str(config), log_dir=str(work / "logs"))
    run = start(spec)
    try:
        start_s = wait_ready(run, spec.base_url + health)
        body = chat_body(adapter)
        asyncio.run(_ttft_ms(spec.base_url, body))  # warm-up
        ttfts = [asyncio.run(_ttft_ms(spec.base_url, body)) for _ in range(requests)]
    finally:
        stop(run)
    return {"system": system, "adapter": adapter, "start_s": round(start_s, 2),
            "idle_ttft_ms": round(statistics.median(ttfts), 1),
            "ttfts_ms": [round(t, 1) for t in ttfts]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench adapter-startup", description=__doc__)
    parser.add_argument("--adapters", default="llava,llama,qwen2_vl")
    parser.add_argument("--rounds", type=int, default=3, help="each system this many times")
    parser.add_argument("--requests", type=int, default=5)
    parser.add_argument("--port", type=int, default=8431)
    parser.add_argument("--out", type=Path, default=Path("results/adapter_startup.json"))
    args = parser.parse_args(argv)
    run = Run()
    work = Path(tempfile.mkdtemp(prefix="adapter-startup-"))
    dirs = tiny_dirs(work / "models", args.adapters.split(","))
    rows = [measure(system, adapter, path, args.port, args.requests, work)
            for _ in range(args.rounds) for adapter, path in dirs.items() for system in SYSTEMS]
    checks = []
    print(f"{'adapter':<8} {'system':<11} {'start s (median, range)':<26} idle TTFT ms (median)")
    for adapter in dirs:
        for system in SYSTEMS:
            mine = [r for r in rows if r["adapter"] == adapter and r["system"] == system]
            starts = [r["start_s"] for r in mine]
            ttfts = [r["idle_ttft_ms"] for r in mine]
            print(f"{adapter:<8} {system:<11} {statistics.median(starts):>6.1f} "
                  f"({min(starts):.1f}-{max(starts):.1f}){'':<12} "
                  f"{statistics.median(ttfts):.1f} ({min(ttfts):.1f}-{max(ttfts):.1f})")
            checks += [Check(f"{adapter} {system} start_s", statistics.median(starts), None,
                             None),
                       Check(f"{adapter} {system} idle_ttft_ms", statistics.median(ttfts), None,
                             None)]
    return run.finish(args.out, {"rows": rows, "model_dirs": {a: str(p) for a, p in
                                                               dirs.items()}},
                      settings=vars(args) | {"out": str(args.out)}, checks=checks)
