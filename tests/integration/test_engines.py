"""Both engines on the session's VLM (`vlm_dir`: the tiny one in CI, the trained one where it
is cached): the same greedy request gives the same tokens on vLLM and on transformers, with
pixels and with the encoder stage's embeddings; and a GPU run of the trained VLM where CUDA
exists (`-m gpu`). vLLM starts its own processes (~40-60 s on CPU), once for the module."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]
vllm = pytest.importorskip("vllm")


@pytest.fixture(scope="module")
def loop() -> Any:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def model_dir(vlm_dir: Any) -> str:
    return str(vlm_dir)


@pytest.fixture(scope="module")
def engines(model_dir: str, loop: Any) -> Any:
    from deployments.engines import make_engine

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    hf = make_engine("transformers", model_dir)
    vl = make_engine("vllm", model_dir, {"max_model_len": context(model_dir), "max_num_seqs": 8})
    loop.run_until_complete(hf.start())
    loop.run_until_complete(vl.start())
    yield hf, vl
    vl.shutdown()
    hf.shutdown()


def context(model_dir: str) -> int:
    from deployments.engines.model_dir import read_model_dir

    return read_model_dir(model_dir).max_position


def requests(model_dir: str, limit: int) -> list[tuple[str, list[Any], str]]:
    """(prompt, PIL images, answer) of held-out examples of every task."""
    from PIL import Image
    from transformers import AutoTokenizer

    from deployments.models.vlm.config import VlmConfig
    from deployments.models.vlm.data import digit_splits, render, test_examples
    from deployments.models.vlm.prompts import prompt_text

    cfg = VlmConfig()
    tok = AutoTokenizer.from_pretrained(model_dir)
    splits = digit_splits(cfg.data)
    pixels = render(splits["test"].images, cfg.vision.image_size_px, cfg.data)
    out = []
    for examples in test_examples(cfg.data, splits).values():
        for e in examples[:limit]:
            images = [Image.fromarray(pixels[i].numpy(), mode="L").convert("RGB")
                      for i in e.image_ids]
            out.append((prompt_text(tok, e.text, len(images)), images, e.answer))
    return out


async def tokens(engine: Any, rid: str, prompt: str, images: tuple[Any, ...]) -> list[int]:
    from deployments.engines import GenerationRequest

    out: list[int] = []
    async for d in engine.generate(GenerationRequest(rid, prompt, 12, images=images)):
        out.extend(d.token_ids)
    return out


def test_same_greedy_tokens_on_both_engines(engines: Any, model_dir: str, loop: Any) -> None:
    from deployments.generation.vision import VisionEncoder

    hf, vl = engines
    vision = VisionEncoder(model_dir)
    for k, (prompt, images, _) in enumerate(requests(model_dir, 4)):
        ref = loop.run_until_complete(tokens(hf, f"h{k}", prompt, tuple(images)))
        assert loop.run_until_complete(tokens(vl, f"p{k}", prompt, tuple(images))) == ref
        if images:
            embeds = tuple(vision.encode(images))
            assert loop.run_until_complete(tokens(vl, f"e{k}", prompt, embeds)) == ref
            assert loop.run_until_complete(tokens(hf, f"x{k}", prompt, embeds)) == ref


def test_prompt_counts_agree(engines: Any, model_dir: str) -> None:
    from deployments.engines.image_inputs import image_tokens
    from deployments.engines.model_dir import read_model_dir

    hf, vl = engines
    facts = read_model_dir(model_dir)
    for prompt, images, _ in requests(model_dir, 2):
        tokens = image_tokens(facts, images)
        assert hf.prompt_tokens(prompt, tokens) == vl.prompt_tokens(prompt, tokens)


def test_priority_orders_waiting_requests(engines: Any, model_dir: str, loop: Any) -> None:
    """transformers runs one request at a time: a lower priority value waiting runs first."""
    from deployments.engines import GenerationRequest

    hf, _ = engines
    prompt = requests(model_dir, 1)[-1][0]  # text only
    finished: list[str] = []

    async def one(rid: str, priority: int) -> None:
        async for d in hf.generate(GenerationRequest(rid, prompt, 6, priority=priority)):
            if d.finished:
                finished.append(rid)

    async def main() -> None:
        await hf._turns.acquire(0)  # a request is running: the two below wait
        waiting = [asyncio.ensure_future(one("late", 9)), asyncio.ensure_future(one("urgent", 1))]
        while hf._turns.waiting < 2:  # both queued behind the running one (no wall-clock wait)
            await asyncio.sleep(0)
        finished.append("running")
        hf._turns.release()
        await asyncio.gather(*waiting)

    loop.run_until_complete(asyncio.wait_for(main(), timeout=120))
    assert finished == ["running", "urgent", "late"]


@pytest.mark.gpu
@pytest.mark.skipif(not os.environ.get("CUDA_VISIBLE_DEVICES") and not os.path.exists(
    "/dev/nvidia0"), reason="no CUDA device")
def test_vllm_on_gpu(trained_vlm_dir: Any, loop: Any) -> None:
    """Where CUDA exists (PyPI `vllm`, ADAPTSERVE_GPU=1): the engine starts on the GPU and
    answers the held-out digits (the trained VLM's accuracy)."""
    from deployments.engines import make_engine

    model_dir = str(trained_vlm_dir)

    engine = make_engine("vllm", model_dir, {"max_model_len": context(model_dir),
                                             "gpu_memory_utilization": 0.2})
    loop.run_until_complete(engine.start())
    try:
        reqs = requests(model_dir, 8)
        right = sum(loop.run_until_complete(text_of(engine, f"g{k}", p, tuple(i))).strip() == a
                    for k, (p, i, a) in enumerate(reqs))
        assert right >= 0.6 * len(reqs)
    finally:
        engine.shutdown()


async def text_of(engine: Any, rid: str, prompt: str, images: tuple[Any, ...]) -> str:
    from deployments.engines import GenerationRequest

    out = ""
    async for d in engine.generate(GenerationRequest(rid, prompt, 12, images=images)):
        out += d.text
    return out


async def run_sampled(engine: Any, rid: str, prompt: str, max_tokens: int,
                      sampling: Any) -> tuple[list[int], str, str | None]:
    """(token ids, text, finish reason) of one request with its `Sampling`."""
    from deployments.engines import GenerationRequest

    ids: list[int] = []
    text, reason = "", None
    async for d in engine.generate(GenerationRequest(rid, prompt, max_tokens,
                                                     sampling=sampling)):
        ids.extend(d.token_ids)
        text += d.text
        reason = d.finish_reason if d.finished else reason
    return ids, text, reason


def test_same_seed_same_tokens_and_sampling_samples(engines: Any, model_dir: str,
                                                    loop: Any) -> None:
    """On each engine: a sampled request with a seed gives the same tokens twice; the seeds
    differ in what they draw (temperature 2 on a random-init or trained model's logits)."""
    from deployments.engines.sampling import Sampling

    prompt = requests(model_dir, 1)[-1][0]
    for name, engine in zip(("transformers", "vllm"), engines, strict=True):
        runs = {seed: [loop.run_until_complete(run_sampled(
            engine, f"{name}-s{seed}-{k}", prompt, 16,
            Sampling(temperature=2.0, seed=seed)))[0] for k in range(2)] for seed in range(4)}
        for seed, (a, b) in runs.items():
            assert a == b, (name, seed)
        assert len({tuple(a) for a, _ in runs.values()}) > 1, (name, runs)


def test_stop_sequences_and_ignore_eos(engines: Any, model_dir: str, loop: Any) -> None:
    """Both engines end the answer before a stop sequence found in the greedy answer (finish
    reason "stop", the sequence not sent), and with ignore_eos generate max_tokens tokens."""
    from deployments.engines.sampling import Sampling

    prompt = requests(model_dir, 1)[-1][0]
    hf, vl = engines
    _, full, _ = loop.run_until_complete(run_sampled(hf, "full", prompt, 24,
                                                     Sampling(ignore_eos=True)))
    assert len(full) >= 4, full
    stop = full[len(full) // 2:len(full) // 2 + 2]
    expected = full[:full.find(stop)]
    for name, engine in (("transformers", hf), ("vllm", vl)):
        ids, text, reason = loop.run_until_complete(run_sampled(
            engine, f"{name}-stop", prompt, 24, Sampling(stop=(stop,), ignore_eos=True)))
        assert (text, reason) == (expected, "stop"), (name, full, stop)
        ids, _, reason = loop.run_until_complete(run_sampled(
            engine, f"{name}-eos", prompt, 24, Sampling(ignore_eos=True)))
        assert (len(ids), reason) == (24, "length"), name
