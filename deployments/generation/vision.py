"""The image stage's model work: image bytes -> PIL image -> the VLM's vision tower + projector
-> embeddings per image, the very tensors the LLM engine would compute from pixels (the engines
tests check they give the same tokens): [tokens, hidden] for LLaVA (LLaVA-NeXT / OneVision: its
rows following the image's size), a `GridEmbeds` (embeddings and patch grid, tokens following
the image's size) for Qwen2-VL / Qwen2.5-VL. The model directory's adapter chooses
(`load_vision_encoder`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
from PIL import Image

from deployments.engines.image_inputs import GridEmbeds
from deployments.engines.model_dir import read_model_dir
from deployments.models.image_bytes import open_checked_image

log = logging.getLogger(__name__)
MAX_IMAGE_SIDE = 4096


def open_image(raw: bytes, field: str = "image") -> Image.Image:
    """An RGB PIL image from PNG/JPEG/WebP bytes of at most MAX_IMAGE_SIDE a side
    (`open_checked_image`: UnsupportedMediaType, InputError otherwise)."""
    return open_checked_image(raw, field, MAX_IMAGE_SIDE, "RGB")


class ImageEncoding(Protocol):
    def encode(self, images: list[Image.Image]) -> Any:
        """One embedding per image, in order."""


def load_vision_encoder(model_dir: str | Path) -> ImageEncoding:
    """The vision part alone of the model directory, as its architecture's adapter says."""
    adapter = read_model_dir(model_dir).adapter
    if adapter == "qwen_vl":
        from deployments.engines.qwen_vl import QwenVisionTower

        return QwenVisionTower(model_dir)
    if adapter == "llava_tiled":
        from deployments.engines.llava_tiled import TiledVisionTower

        return TiledVisionTower(model_dir)
    if adapter != "llava":
        raise ValueError(f"{model_dir}: a {adapter} model has no vision part to encode with")
    return VisionEncoder(model_dir)


def image_group(embeds: Sequence[Any]) -> tuple[Any, int]:
    """A group's embeddings as one object to hand the LLM stage, and its image tokens:
    [images, tokens, hidden] stacked (images of one size), or a tuple of [tokens, hidden]
    tensors or of `GridEmbeds` (sizes differ)."""
    if embeds and isinstance(embeds[0], GridEmbeds):
        return tuple(embeds), sum(e.tokens for e in embeds)
    if len({tuple(e.shape) for e in embeds}) > 1:
        return tuple(embeds), sum(int(e.shape[0]) for e in embeds)
    stacked = torch.stack(list(embeds))
    return stacked, int(stacked.shape[0] * stacked.shape[1])


class VisionEncoder:
    """Vision tower + projector of a LLaVA-style model directory (the language model is dropped
    after loading)."""

    def __init__(self, model_dir: str | Path) -> None:
        from transformers import AutoImageProcessor, LlavaForConditionalGeneration

        full = LlavaForConditionalGeneration.from_pretrained(str(model_dir),
                                                             dtype=torch.float32).eval()
        self._model: Any = full.model
        self._model.language_model = None  # the encoder stage never runs it
        self._processor = AutoImageProcessor.from_pretrained(str(model_dir))

    @torch.inference_mode()
    def encode(self, images: list[Image.Image]) -> torch.Tensor:
        """[len(images), tokens, hidden] float32."""
        pixels = self._processor(images, return_tensors="pt")["pixel_values"]
        feats = self._model.get_image_features(pixel_values=pixels, return_dict=True)
        return torch.stack(list(feats.pooler_output))
