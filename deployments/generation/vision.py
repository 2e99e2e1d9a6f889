"""The image stage's model work: image bytes -> PIL image -> the VLM's vision tower + projector
-> embeddings [tokens, hidden] per image, the very tensors the LLM engine would compute from
pixels (the engines test checks they give the same tokens)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from deployments.models.image_bytes import open_checked_image

log = logging.getLogger(__name__)
MAX_IMAGE_SIDE = 4096


def open_image(raw: bytes, field: str = "image") -> Image.Image:
    """An RGB PIL image from PNG/JPEG/WebP bytes of at most MAX_IMAGE_SIDE a side
    (`open_checked_image`: UnsupportedMediaType, InputError otherwise)."""
    return open_checked_image(raw, field, MAX_IMAGE_SIDE, "RGB")


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
