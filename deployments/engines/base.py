"""What every generation engine takes and gives (vLLM, transformers): one interface, so the LLM
and monolith deployments do not care which engine runs the model.

A request carries a chat-rendered prompt with one image placeholder per image and, for each
image, either its precomputed embeddings (the disaggregated path: the encoder stage ran the vision
tower and projector) or its pixels as a PIL image (the monolith: the engine encodes). Engines
stream `TokenDelta`s; the last one has `finished=True`, its `finish_reason` and the token counts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from deployments.engines.sampling import Sampling

FinishReason = Literal["stop", "length", "abort"]


class EngineError(RuntimeError):
    """The engine refused or failed a request (bad prompt, engine dead); the message says why."""


class PromptTooLong(EngineError):
    """Prompt + max_tokens do not fit the engine's context (a client error: 400)."""


@dataclass(frozen=True)
class GenerationRequest:
    """One generation. `images` are embeddings tensors [tokens, hidden] (one per image, in the
    prompt's order) or PIL images; `priority`: lower runs first (deadline order)."""

    request_id: str
    prompt: str
    max_tokens: int
    images: tuple[Any, ...] = field(default=(), repr=False)
    priority: int = 0
    sampling: Sampling = Sampling()  # greedy unless the request asked otherwise

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")


@dataclass(frozen=True)
class TokenDelta:
    """New text since the last delta. Counts are set on the final delta."""

    text: str
    token_ids: tuple[int, ...]
    finished: bool = False
    finish_reason: FinishReason | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class EngineInfo:
    """What the serving layer needs to know of a loaded model."""

    name: str  # engine kind
    model_dir: str
    max_model_len: int
    tokens_per_image: int
    image_hidden: int  # the LLM's embedding width (what the encoder stage hands over)
    image_token: str  # the placeholder in prompts, one per image


class Engine(Protocol):
    """A started engine. `generate` is an async iterator of deltas; cancelling it (or `abort`)
    frees the request's slot in the engine."""

    info: EngineInfo

    async def start(self) -> None: ...

    def generate(self, request: GenerationRequest) -> AsyncIterator[TokenDelta]: ...

    async def abort(self, request_id: str) -> None: ...

    def prompt_tokens(self, prompt: str, image_tokens: Sequence[int]) -> int:
        """The prompt's tokens, each image placeholder expanded to its image's tokens."""

    def shutdown(self) -> None: ...
