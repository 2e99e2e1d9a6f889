"""What an engine takes as a request's images, and how many tokens each is (no torch at import):

- a PIL image (the monolith: the engine runs the vision tower);
- a tensor [tokens, hidden] (a fixed-size model's encoder stage output, LLaVA);
- a `GridEmbeds` (a dynamic-resolution model's encoder stage output, Qwen2-VL / Qwen2.5-VL:
  the embeddings and the patch grid they came from, which the LLM's M-RoPE positions and
  vLLM's `image_grid_thw` need).

A PIL image's tokens are its architecture adapter's count for its size
(`ModelFacts.tokens_for`); precomputed embeddings are as many tokens as they have rows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from deployments.engines.architectures import ModelFacts
from deployments.engines.base import EngineError


@dataclass(frozen=True)
class GridEmbeds:
    """One image's embeddings [tokens, hidden] and its patch grid (t, h, w) before merging
    (tokens = t * h * w / merge_size^2)."""

    embeds: Any = field(repr=False)  # torch.Tensor [tokens, hidden]
    grid_thw: tuple[int, int, int]

    @property
    def tokens(self) -> int:
        return int(self.embeds.shape[0])


def image_tokens(facts: ModelFacts, images: Sequence[Any]) -> tuple[int, ...]:
    """Each image's tokens, as the engine will expand its placeholder."""
    return tuple(_tokens(facts, x) for x in images)


def _tokens(facts: ModelFacts, image: Any) -> int:
    if isinstance(image, GridEmbeds):
        return image.tokens
    size = getattr(image, "size", None)
    if isinstance(size, tuple) and len(size) == 2:  # a PIL image: (width, height)
        return facts.tokens_for(*size)
    shape = getattr(image, "shape", None)
    if shape is not None:  # embeddings [tokens, hidden] (or [1, tokens, hidden])
        return int(image.numel() // shape[-1])
    raise EngineError(f"an image must be a PIL image or embeddings, got {type(image).__name__}")


def expand_placeholders(ids: list[int], image_id: int | None, tokens: Sequence[int]
                        ) -> list[int]:
    """`ids` with the k-th image placeholder repeated tokens[k] times (EngineError: as many
    placeholders as images, or the message says how many of each)."""
    found = 0 if image_id is None else sum(1 for t in ids if t == image_id)
    if found != len(tokens):
        raise EngineError(f"prompt has {found} image placeholders for {len(tokens)} images")
    out: list[int] = []
    k = 0
    for t in ids:
        if t == image_id:
            out.extend([t] * tokens[k])
            k += 1
        else:
            out.append(t)
    return out
