"""The generation path as the ingress runs it (asyncio + Serve handles; no torch):

    disaggregated: images -> encoder replicas (split into at most one group per replica,
                   the groups in parallel) -> all ready ->
                   LLM replica chosen, pulls the embeddings by reference -> stream
    monolith:      images as bytes -> LLM replica (the engine encodes) -> stream
    text only:     LLM replica -> stream (the encoders are skipped)

Every request yields exactly one final chunk: the engine's, or an explicit `deadline_exceeded` /
error chunk from the stage that gave up.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from deployments.engines.sampling import Sampling
from deployments.generation.stage_messages import EncodedImage, GenChunk, GenerateCall, ImageCall
from policies.generation.image_split import image_groups

log = logging.getLogger(__name__)

IMAGE_STATUS = {"deadline_exceeded": "deadline_exceeded", "invalid_input": "invalid_request",
                "unsupported_media_type": "invalid_request", "overloaded": "overloaded",
                "error": "error"}


@dataclass(frozen=True)
class ChatJob:
    request_id: str
    prompt: str  # rendered by the chat template, one image placeholder per image
    prompt_tokens: int  # image tokens included
    images: tuple[bytes, ...] = field(repr=False)  # in prompt order
    max_tokens: int
    arrival_s: float
    ttft_deadline_s: float
    sampling: Sampling = Sampling()
    image_tokens: tuple[int, ...] = ()  # per image, the adapter's count from its size


@dataclass(frozen=True)
class StageTiming:
    """Where one request's time to its first chunk went, as the ingress sees it (the
    `adaptserve_chat_stage_seconds` histogram, deployments/ingress/metrics.py)."""

    path: str  # "monolith" or "disaggregated"
    images: int
    encode_s: float | None  # the encoder calls: sent -> all answered (None: none made)
    encoder_busy_s: float | None  # of that, inside the slowest group's encoder replica
    first_chunk_s: float  # the LLM call -> its first chunk (pull + engine + the hop)


class GenerationPipeline:
    def __init__(self, llm: Any, encoder: Any | None, tokens_per_image: int,
                 count_image_tokens: bool = True, fan_out: int = 1,
                 on_timing: Callable[[StageTiming], None] | None = None) -> None:
        """`encoder` None: the monolith (images go to the LLM replica as bytes).
        `count_image_tokens`: the LLM router's cost counts image tokens (decoder-only models)
        or text tokens only (cross-attention models). `fan_out`: the most encoder calls one
        request's images are split into (the encoder replicas). `on_timing`: told each
        request's `StageTiming` once its first chunk is in."""
        self.llm = llm.options(stream=True)
        self.encoder = encoder
        self.tokens_per_image = tokens_per_image
        self.count_image_tokens = count_image_tokens
        self.fan_out = max(1, fan_out)
        self.on_timing = on_timing

    @property
    def path(self) -> str:
        return "monolith" if self.encoder is None else "disaggregated"

    def call_of(self, job: ChatJob) -> GenerateCall:
        image_tokens = sum(self.image_tokens(job))
        route = job.prompt_tokens if self.count_image_tokens else job.prompt_tokens - image_tokens
        return GenerateCall(job.request_id, job.prompt, job.max_tokens, job.arrival_s,
                            job.ttft_deadline_s, job.prompt_tokens, len(job.images),
                            route_tokens=route, sampling=job.sampling, image_tokens=image_tokens)

    def image_tokens(self, job: ChatJob) -> tuple[int, ...]:
        """Each image's tokens: the ingress's count (the adapter's, from the image's size), else
        the model's fixed tokens per image."""
        return job.image_tokens or (self.tokens_per_image,) * len(job.images)

    async def run(self, job: ChatJob) -> AsyncIterator[GenChunk]:
        call = self.call_of(job)
        images: list[Any] = list(job.images)
        encode_s = busy_s = None
        if job.images and self.encoder is not None:
            start = time.perf_counter()
            encoded = await self._encode(job)
            encode_s = time.perf_counter() - start
            busy_s = max(e.encode_ms for e in encoded) / 1000.0
            bad = next((e for e in encoded if e.status != "ok"), None)
            if bad is not None:
                yield GenChunk(finished=True, status=IMAGE_STATUS[bad.status],  # type: ignore[arg-type]
                               message=bad.message)
                return
            images = [e.ref for e in encoded]
        start, first = time.perf_counter(), True
        async for chunk in self.llm.generate.remote(call, images):
            if first:
                first = False
                self._timing(StageTiming(self.path, len(job.images), encode_s, busy_s,
                                         time.perf_counter() - start))
            yield chunk

    def _timing(self, timing: StageTiming) -> None:
        if self.on_timing is None:
            return
        try:  # a metrics hook never costs a request its answer
            self.on_timing(timing)
        except Exception:
            log.exception("stage timing hook failed")

    async def _encode(self, job: ChatJob) -> list[EncodedImage]:
        tokens = self.image_tokens(job)
        calls = [self.encoder.encode.remote(
                     ImageCall(job.request_id, start, job.images[start:stop], job.ttft_deadline_s,
                               route_tokens=sum(tokens[start:stop])))
                 for start, stop in image_groups(len(job.images), self.fan_out)]
        return list(await asyncio.gather(*calls))
