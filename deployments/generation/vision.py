"""The image stage's model work: image bytes -> PIL image -> the VLM's vision tower + projector
-> embeddings [tokens, hidden] per image, the very tensors the LLM engine would compute from
pixels (the engines test checks they give the same tokens)."""

from __future__ import annotations

import io
import logging
import warnings
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from deployments.models.base import InputError
from deployments.models.input_decoding import check_image_format

log = logging.getLogger(__name__)
MAX_IMAGE_SIDE = 4096


def open_image(raw: bytes, field: str = "image") -> Image.Image:
    """An RGB PIL image from PNG/JPEG/WebP bytes (UnsupportedMediaType for other image formats,
    InputError for anything that is not a decodable image of at most MAX_IMAGE_SIDE a side)."""
    fmt = check_image_format(raw, field)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(raw), formats=[fmt]) as img:
                if max(img.size) > MAX_IMAGE_SIDE:
                    raise InputError(f"{field}: image {img.size[0]}x{img.size[1]} exceeds "
                                     f"{MAX_IMAGE_SIDE} a side")
                return img.convert("RGB")
    except InputError:
        raise
    except Exception as exc:  # PIL raises many types for corrupt bytes
        raise InputError(f"{field}: not a decodable image ({type(exc).__name__})") from None


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
