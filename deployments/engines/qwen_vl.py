"""Qwen2-VL / Qwen2.5-VL on transformers: the vision tower alone (`model.visual`, what the
encoder stage runs), and the prefill inputs of the transformers engine: the prompt's ids, each
image's embeddings with its patch grid (from pixels here, or precomputed by the encoder stage)
and the token types the model's M-RoPE positions are computed from."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from deployments.engines.base import EngineError
from deployments.engines.image_inputs import GridEmbeds
from deployments.engines.vision_part import vision_part


class QwenVisionTower:
    """The vision tower and merger of a Qwen-VL model directory (the language model dropped
    after loading) with its image processor: PIL images -> one `GridEmbeds` each."""

    def __init__(self, path: str | Path, model: Any | None = None,
                 trust_remote_code: bool = False) -> None:
        self._inner, self._processor = vision_part(path, model, trust_remote_code)

    @torch.inference_mode()
    def encode(self, images: Sequence[Any]) -> list[GridEmbeds]:
        x = self._processor(images=list(images), return_tensors="pt")
        grid = x["image_grid_thw"]
        feats = self._inner.get_image_features(x["pixel_values"], grid,
                                               return_dict=True).pooler_output
        return [GridEmbeds(f.float().contiguous(), (int(t), int(h), int(w)))
                for f, (t, h, w) in zip(feats, grid.tolist(), strict=True)]


def prefill_inputs(ids: list[int], image_token_id: int, images: Sequence[GridEmbeds]
                   ) -> dict[str, Any]:
    """The model's forward arguments for a prompt whose image placeholders are expanded."""
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    input_ids = torch.tensor([ids])
    types = (input_ids == image_token_id).int()
    if int(types.sum()) != sum(e.tokens for e in images):
        raise EngineError(f"{int(types.sum())} image tokens for "
                          f"{sum(e.tokens for e in images)} image embeddings")
    if not images:
        return {"input_ids": input_ids}
    pooled = BaseModelOutputWithPooling(pooler_output=tuple(e.embeds for e in images))
    return {"input_ids": input_ids, "mm_token_type_ids": types,
            "image_grid_thw": torch.tensor([e.grid_thw for e in images]),
            "mm_encoder_outputs": {"image": pooled}}


def vllm_image_data(images: Sequence[GridEmbeds]) -> dict[str, Any]:
    """vLLM's Qwen-VL embedding input: every image's embeddings concatenated, with their
    grids (vLLM splits them by grid)."""
    return {"image_embeds": torch.cat([e.embeds for e in images]),
            "image_grid_thw": torch.tensor([e.grid_thw for e in images])}
