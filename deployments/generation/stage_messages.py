"""What travels between the ingress and the generation stages (frozen, picklable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from deployments.engines.sampling import Sampling

ImageStatus = Literal["ok", "deadline_exceeded", "invalid_input", "unsupported_media_type",
                      "overloaded", "error"]
ChunkStatus = Literal["ok", "deadline_exceeded", "invalid_request", "overloaded", "unavailable",
                      "error"]


@dataclass(frozen=True)
class ImageCall:
    """A group of a request's images (consecutive, in prompt order), to one encoder replica.
    A request's images are split into at most as many groups as there are encoder replicas,
    so they are encoded in parallel with one hop per replica, not one per image."""

    request_id: str
    index: int  # the group's first image's place in the request
    data: tuple[bytes, ...] = field(repr=False)  # the group's images, in order
    deadline_s: float  # the request's TTFT deadline (wall clock)
    after_s: float = 0.0  # expected time after encoding (the LLM's prefill)
    route_tokens: int = 0  # the group's image tokens (the encoder router's cost)


@dataclass(frozen=True)
class EncodedImage:
    """An encoder's answer for a group: on `ok`, `ref` holds one ObjectRef of the embeddings
    [images, tokens, hidden] in the encoder's object store (the LLM pulls it; the ingress only
    passes the reference on)."""

    status: ImageStatus
    ref: tuple[Any, ...] = ()
    tokens: int = 0
    message: str = ""
    encode_ms: float = 0.0
    queued_ms: float = 0.0


@dataclass(frozen=True)
class GenerateCall:
    request_id: str
    prompt: str  # rendered by the chat template, one image placeholder per image
    max_tokens: int
    arrival_s: float
    deadline_s: float  # TTFT deadline (wall clock)
    prompt_tokens: int  # image tokens included
    num_images: int
    route_tokens: int = 0  # the LLM router's cost (text [+ image] prompt tokens)
    sampling: Sampling = Sampling()  # how the engine chooses tokens (greedy by default)
    # the images' tokens, each image's as its architecture's adapter counts it from its size
    # (None: num_images x the model's fixed tokens per image)
    image_tokens: int | None = None


@dataclass(frozen=True)
class GenChunk:
    """A piece of the stream from the LLM stage. The last has `finished` (and the counts)."""

    text: str = ""
    tokens: int = 0
    finished: bool = False
    finish_reason: str | None = None
    status: ChunkStatus = "ok"
    message: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
