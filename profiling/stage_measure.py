"""Timing a generation model's stages on this machine, through the code the stage replicas run
(docs/profiling.md, "Stage profiles"):

- encoder: `VisionEncoder.encode` (deployments/generation/vision.py) on a batch of decoded
  held-out digit images (PNG bytes -> `open_image`, outside the timing, as the encoder replica
  decodes before it queues), the way `EncoderLoop` hands it a batch;
- prefill: the LLM replica's engine (`VllmEngine` / `TransformersEngine`), one text prompt of
  exactly n tokens (random single-token words, a fresh prompt every call, so vLLM's prefix
  cache never serves one), `max_tokens=1`, from `generate()` to the first token;
- decode: B sequences started together, each generating `tokens` tokens with EOS ignored; a
  sequence's time between tokens is (last token - first token) / (tokens - 1) at the caller
  (vLLM may hand over two steps' tokens at once when the caller lags, so single gaps are not
  read). The transformers engine runs one request at a time: its decode batch is 1.

The engine subclasses below add only the decode-with-EOS-ignored call the serving interface
does not have (`Engine.generate` stops at EOS); prefill goes through `generate` itself.
"""

from __future__ import annotations

import asyncio
import gc
import io
import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deployments.engines import GenerationRequest
from deployments.engines.hf import TransformersEngine
from deployments.engines.vllm_engine import VllmEngine, VllmSettings

log = logging.getLogger(__name__)

ENGINE_KINDS = ("vllm", "transformers")
Samples = dict[int, list[float]]  # size -> milliseconds


def timed_ms(fn: Callable[[], object], warmup: int, repeats: int) -> list[float]:
    """Wall milliseconds of `repeats` calls of `fn` after `warmup` discarded ones (the garbage
    collector off while timing)."""
    for _ in range(warmup):
        fn()
    samples = []
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1000.0)
    finally:
        if was_enabled:
            gc.enable()
    return samples


def held_out_images(count: int) -> list[Any]:
    """`count` held-out digit images (cycled) as the encoder replica holds them: PNG bytes a
    client sends, decoded by `open_image`."""
    from PIL import Image

    from deployments.generation.vision import open_image
    from deployments.models.vlm.config import VlmConfig
    from deployments.models.vlm.data import digit_splits, render

    cfg = VlmConfig()
    test = digit_splits(cfg.data)["test"].images[:count]
    pixels = render(test, cfg.vision.image_size_px, cfg.data)
    images = []
    for k in range(count):
        buf = io.BytesIO()
        Image.fromarray(pixels[k % len(pixels)].numpy(), mode="L").save(buf, format="PNG")
        images.append(open_image(buf.getvalue()))
    return images


def measure_encoder(model_dir: Path, batches: Sequence[int], warmup: int,
                    repeats: int) -> Samples:
    """Milliseconds per `VisionEncoder.encode` call of b images, for each b in `batches`."""
    from deployments.generation.vision import VisionEncoder

    vision = VisionEncoder(model_dir)
    images = held_out_images(max(batches))
    out: Samples = {}
    for b in sorted(set(batches)):
        batch = images[:b]
        out[b] = timed_ms(lambda batch=batch: vision.encode(batch), warmup, repeats)  # type: ignore[misc]
        log.info("encoder batch %d: median %.2f ms", b, sorted(out[b])[len(out[b]) // 2])
    return out


class ProfiledVllm(VllmEngine):
    batches_decode = True

    async def decode_stamps(self, prompt: str, tokens: int, request_id: str) -> list[float]:
        """perf_counter() at which each generated token arrived (EOS ignored)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(max_tokens=tokens, temperature=0.0, ignore_eos=True,
                                output_kind=RequestOutputKind.DELTA)
        stamps: list[float] = []
        async for out in self._llm.generate({"prompt": prompt}, params, request_id):
            now = time.perf_counter()
            stamps.extend([now] * len(out.outputs[0].token_ids))
        return stamps


class ProfiledTransformers(TransformersEngine):
    batches_decode = False

    async def decode_stamps(self, prompt: str, tokens: int, request_id: str) -> list[float]:
        """The engine's own prefill and steps (and its per-token detokenizing), EOS ignored."""
        loop = asyncio.get_running_loop()
        ids = self.prompt_ids(prompt, 0)
        await self._turns.acquire(0)
        try:
            run = await loop.run_in_executor(self._pool, self._prefill, ids, ())
            stamps = [time.perf_counter()]
            for _ in range(tokens - 1):
                run = await loop.run_in_executor(self._pool, self._step, run)
                self._tok.decode(run.ids, skip_special_tokens=True)
                stamps.append(time.perf_counter())
        finally:
            self._turns.release()
        return stamps


def profiled_engine(kind: str, model_dir: Path,
                    settings: dict[str, Any]) -> ProfiledVllm | ProfiledTransformers:
    """The engine `deployments.engines.make_engine(kind, ...)` builds, plus `decode_stamps`."""
    if kind == "vllm":
        return ProfiledVllm(model_dir, VllmSettings(**settings))
    if kind == "transformers":
        return ProfiledTransformers(model_dir, settings.get("max_model_len"))
    raise ValueError(f"unknown engine {kind!r}; valid: {list(ENGINE_KINDS)}")


class PromptMaker:
    """Text prompts of exactly n tokens of the model's tokenizer: random words that are one
    token each (a leading space keeps the tokenizer from merging them)."""

    def __init__(self, model_dir: Path, seed: int = 0) -> None:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(model_dir))
        words = set()
        for i in range(len(tok)):
            text = str(tok.decode([i]))
            if (len(text) > 2 and text[0] == " " and text[1:].isalpha()
                    and tok(text * 3, add_special_tokens=False)["input_ids"] == [i] * 3):
                words.add(text)
        if len(words) < 4:
            raise ValueError(f"{model_dir}: too few single-token words ({len(words)}) to build "
                             "prompts of a given length")
        self.words = sorted(words)
        self._rng = random.Random(seed)

    def __call__(self, n: int) -> str:
        return "".join(self._rng.choice(self.words) for _ in range(n))


@dataclass(frozen=True)
class LlmSamples:
    prefill: Samples  # prompt tokens -> ms to the first token
    tbt: Samples  # decode batch -> ms between tokens, one sample per sequence
    engine_start_s: float


async def _prefill_ms(engine: Any, prompts: PromptMaker, n: int, calls: int) -> list[float]:
    out = []
    for k in range(calls):
        prompt = prompts(n)
        got = engine.prompt_tokens(prompt, ())
        if got != n:
            raise RuntimeError(f"a prompt meant to be {n} tokens is {got} to the engine")
        start = time.perf_counter()
        first = None
        async for _ in engine.generate(GenerationRequest(f"prefill-{n}-{k}", prompt, 1)):
            first = time.perf_counter() if first is None else first
        out.append(((first or time.perf_counter()) - start) * 1000.0)
    return out


async def _tbt_ms(engine: Any, prompts: PromptMaker, batch: int, tokens: int,
                  prompt_tokens: int, rounds: int) -> list[float]:
    out = []
    for r in range(rounds):
        stamps = await asyncio.gather(*[
            engine.decode_stamps(prompts(prompt_tokens), tokens, f"tbt-{batch}-{r}-{i}")
            for i in range(batch)])
        out += [(s[-1] - s[0]) * 1000.0 / (len(s) - 1) for s in stamps if len(s) >= 2]
    return out


async def _measure_llm(engine: Any, prompts: PromptMaker, lengths: Sequence[int],
                       batches: Sequence[int], tokens: int, prompt_tokens: int, warmup: int,
                       repeats: int, decode_repeats: int) -> LlmSamples:
    start = time.perf_counter()
    await engine.start()
    started_s = time.perf_counter() - start
    try:
        prefill: Samples = {}
        for n in lengths:
            prefill[n] = (await _prefill_ms(engine, prompts, n, warmup + repeats))[warmup:]
            log.info("prefill %d tokens: median %.2f ms", n, sorted(prefill[n])[repeats // 2])
        tbt: Samples = {}
        for b in batches:
            await _tbt_ms(engine, prompts, b, tokens, prompt_tokens, warmup)
            tbt[b] = await _tbt_ms(engine, prompts, b, tokens, prompt_tokens, decode_repeats)
            log.info("decode batch %d: median TBT %.2f ms", b, sorted(tbt[b])[len(tbt[b]) // 2])
    finally:
        engine.shutdown()
    return LlmSamples(prefill, tbt, started_s)


def measure_llm(kind: str, model_dir: Path, engine_settings: dict[str, Any],
                lengths: Sequence[int], batches: Sequence[int], tokens: int,
                prompt_tokens: int, warmup: int, repeats: int, decode_repeats: int,
                seed: int = 0) -> LlmSamples:
    """Prefill and decode samples of the engine `kind` (started here, shut down after)."""
    engine = profiled_engine(kind, model_dir, engine_settings)
    if not engine.batches_decode:
        batches = [1]
    prompts = PromptMaker(model_dir, seed)
    return asyncio.run(_measure_llm(engine, prompts, sorted(set(lengths)), sorted(set(batches)),
                                    tokens, prompt_tokens, warmup, repeats, decode_repeats))
