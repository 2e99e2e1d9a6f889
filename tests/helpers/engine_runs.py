"""Both engines started on one model directory, and an engine's streamed answer to one request
collected (the engine tests compare the engines and transformers' own `generate` on it)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any


async def run(engine: Any, rid: str, prompt: str, pictures: tuple[Any, ...],
              max_tokens: int = 8) -> tuple[list[int], int | None]:
    """(the tokens of `max_tokens` steps, ignoring EOS; the prompt tokens the engine reports)."""
    from deployments.engines import GenerationRequest
    from deployments.engines.sampling import Sampling

    ids: list[int] = []
    prompt_tokens = None
    async for d in engine.generate(GenerationRequest(rid, prompt, max_tokens, images=pictures,
                                                     sampling=Sampling(ignore_eos=True))):
        ids.extend(d.token_ids)
        prompt_tokens = d.prompt_tokens if d.finished else prompt_tokens
    return ids, prompt_tokens


def both_engines(model_dir: Any, max_model_len: int) -> Iterator[tuple[Any, Any, Any]]:
    """(transformers engine, vLLM engine, their event loop) started on `model_dir`, shut down
    when the generator closes (a module fixture's body: vLLM starts once per model)."""
    from deployments.engines import make_engine

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    loop = asyncio.new_event_loop()
    hf = make_engine("transformers", model_dir, {"max_model_len": max_model_len})
    vl = make_engine("vllm", model_dir, {"max_model_len": max_model_len, "max_num_seqs": 4,
                                         "max_images": 4})
    loop.run_until_complete(hf.start())
    loop.run_until_complete(vl.start())
    try:
        yield hf, vl, loop
    finally:
        vl.shutdown()
        hf.shutdown()
        loop.close()
