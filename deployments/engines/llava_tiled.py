"""LLaVA-NeXT / LLaVA-OneVision on transformers: the vision part alone (tower, projector and the
anyres packing with its newline tokens; what the encoder stage runs and the transformers engine
runs on pixels): PIL images -> one [tokens, hidden] tensor each, its row count the adapter's
`TiledGrid.tokens_for` of the image's size. Each image is tiled on its own, as vLLM does (for a
prompt of several images, transformers' OneVision processor would not tile them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from deployments.engines.vision_part import vision_part


class TiledVisionTower:
    """PIL images -> one [tokens, hidden] tensor each (the packed, newline-separated tiles)."""

    def __init__(self, path: str | Path, model: Any | None = None,
                 trust_remote_code: bool = False) -> None:
        self._inner, self._processor = vision_part(path, model, trust_remote_code)

    @torch.inference_mode()
    def encode(self, images: Sequence[Any]) -> list[torch.Tensor]:
        x = self._processor(images=list(images), return_tensors="pt")
        feats = self._inner.get_image_features(pixel_values=x["pixel_values"],
                                               image_sizes=x["image_sizes"],
                                               return_dict=True).pooler_output
        return [f.float().contiguous() for f in feats]
