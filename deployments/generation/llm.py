"""The LLM stage (ModServe's text instances), and the monolith: an engine (vLLM or transformers,
deployments/engines/) in the replica, streaming `GenChunk`s. The engine loads the model directory
from its path on the replica's node (deployments/generation/model_files.py).

Disaggregated: the images arrive as references to embeddings in the encoders' object stores,
pulled here only now (the ingress chose this replica once all of them were ready). Monolith
(`monolith=True`): the images arrive as bytes and the engine runs the vision tower itself, as
plain vLLM does. Requests run in TTFT-deadline order (engine priority); a request whose TTFT
deadline is already lost when it gets here is answered `deadline_exceeded` at once.
A call's prompt tokens count toward the replica's pending tokens (the prompt router's count)
until its first chunk, when its prefill is done (policies.generation.token_routing).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from ray import serve

from deployments.autoscaling.decisions import IMAGE_TOKENS, TEXT_TOKENS
from deployments.autoscaling.reporting import ArrivalRates
from deployments.engines import (
    ENGINE_KINDS,
    EngineError,
    GenerationRequest,
    PromptTooLong,
    make_engine,
)
from deployments.generation.model_files import ModelDir
from deployments.generation.routers import ReportsPendingTokens
from deployments.generation.stage_messages import GenChunk, GenerateCall
from deployments.models.base import InputError
from policies.generation.stage_batch import priority_of, ttft_lost

log = logging.getLogger(__name__)


class LLMSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    engine: str = "vllm"
    engine_settings: dict[str, Any] = Field(default_factory=dict)
    monolith: bool = False
    priority: Literal["deadline", "fifo"] = "deadline"
    min_prefill_ms: float = Field(5.0, ge=0)  # below this left before the deadline: lost
    torch_threads: int = Field(1, ge=1)
    rate_window_s: float = Field(5.0, gt=0)  # the autoscaler's arrival-rate window

    def model_post_init(self, _: Any) -> None:
        if self.engine not in ENGINE_KINDS:
            raise ValueError(f"unknown engine {self.engine!r}; valid: {list(ENGINE_KINDS)}")


@serve.deployment(max_ongoing_requests=256)
class LLMBackend(ReportsPendingTokens):
    async def __init__(self, model: ModelDir, settings: dict[str, Any]) -> None:  # type: ignore[misc]
        """`model`: loaded from its path on this node, once checked to hold the builder's
        files (`ModelDir.verified`)."""
        import torch

        self.settings = LLMSettings.model_validate(settings)
        torch.set_num_threads(self.settings.torch_threads)
        model = model.verified()
        self.engine = make_engine(self.settings.engine, model.path, self.settings.engine_settings)
        await self.engine.start()
        self.epoch_s = time.time()
        self.in_flight = 0
        self.tokens_per_image = model.tokens_per_image()
        self.arrivals = ArrivalRates((TEXT_TOKENS, IMAGE_TOKENS), self.settings.rate_window_s)
        log.info("LLM stage ready: %s engine, %s", self.settings.engine,
                 "monolith" if self.settings.monolith else "disaggregated")

    async def _images(self, images: list[Any]) -> tuple[Any, ...]:
        if not images:
            return ()
        if self.settings.monolith:
            from deployments.generation.vision import open_image

            return tuple(open_image(b, f"image {i}") for i, b in enumerate(images))
        if not all(isinstance(refs, tuple | list) and len(refs) == 1 for refs in images):
            raise InputError("a disaggregated LLM stage takes encoder references, not image "
                             "bytes (is the ingress configured for the monolith?)")
        groups = await asyncio.gather(*[_pull(refs[0]) for refs in images])
        return tuple(emb for group in groups for emb in group)  # [tokens, hidden] per image

    async def generate(self, call: GenerateCall, images: list[Any]) -> AsyncIterator[GenChunk]:
        """`images`: per image, bytes (monolith); or per encoder group, a 1-tuple of an
        ObjectRef of its embeddings [images, tokens, hidden] (disaggregated), in prompt order."""
        self.in_flight += 1
        self._count_arrival(call)
        try:
            with self.holding_tokens(call) as hold:  # the prompt token router's count (routers.py)
                async for chunk in self._generate(call, images):
                    hold.settle()  # the first chunk: prefill done, the call stays in flight
                    yield chunk
        finally:
            self.in_flight -= 1

    async def _generate(self, call: GenerateCall, images: list[Any]) -> AsyncIterator[GenChunk]:
        try:
            pixels_or_embeds = await self._images(images)
        except InputError as exc:
            yield GenChunk(finished=True, status="invalid_request", message=str(exc))
            return
        except Exception as exc:  # an encoder replica holding an embedding died
            log.warning("pulling image embeddings failed: %s", exc)
            yield GenChunk(finished=True, status="unavailable",
                           message=f"the image embeddings could not be had: {type(exc).__name__}")
            return
        if ttft_lost(time.time(), call.deadline_s, self.settings.min_prefill_ms / 1000.0):
            yield GenChunk(finished=True, status="deadline_exceeded",
                           message="the TTFT deadline was lost before prefill")
            return
        key = call.deadline_s if self.settings.priority == "deadline" else call.arrival_s
        request = GenerationRequest(call.request_id, call.prompt, call.max_tokens,
                                    pixels_or_embeds, priority_of(key, self.epoch_s),
                                    call.sampling)
        try:
            async for d in self.engine.generate(request):
                yield GenChunk(d.text, len(d.token_ids), d.finished, d.finish_reason,
                               prompt_tokens=d.prompt_tokens,
                               completion_tokens=d.completion_tokens)
        except PromptTooLong as exc:
            yield GenChunk(finished=True, status="invalid_request", message=str(exc))
        except EngineError as exc:
            yield GenChunk(finished=True, status="error", message=str(exc))

    def _count_arrival(self, call: GenerateCall) -> None:
        """Prompt tokens arriving, split: the policy counts text + image tokens for a
        decoder-only model, text only for cross-attention (deployments/autoscaling/)."""
        image = (call.num_images * self.tokens_per_image if call.image_tokens is None
                 else call.image_tokens)
        self.arrivals.add(TEXT_TOKENS, max(0, call.prompt_tokens - image))
        self.arrivals.add(IMAGE_TOKENS, image)

    def record_autoscaling_stats(self) -> dict[str, float]:
        """Serve's autoscaler: text and image prompt tokens/s arriving here."""
        return self.arrivals.rates()

    def ping(self) -> str:
        return "pong"

    def prompt_tokens(self, prompt: str, image_tokens: tuple[int, ...]) -> int:
        return self.engine.prompt_tokens(prompt, image_tokens)

    def __del__(self) -> None:  # the engine's processes go with the replica
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.shutdown()


async def _pull(ref: Any) -> Any:
    """An embeddings tensor from an encoder's object store (ObjectRefs are awaitable but not
    futures asyncio.gather accepts)."""
    return await ref
