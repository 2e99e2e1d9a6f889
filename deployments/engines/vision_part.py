"""A vision-language model directory loaded whole (the transformers engine), or its vision part
alone with its image processor (the encoder stage: the language model dropped after loading).
Shared by the Qwen-VL and tiled LLaVA adapters, whose models transformers' auto class loads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def load_image_text_model(path: str | Path, trust_remote_code: bool = False) -> Any:
    """The whole model (float32, eval)."""
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(
        str(path), dtype=torch.float32, trust_remote_code=trust_remote_code).eval()


def vision_part(path: str | Path, model: Any | None, trust_remote_code: bool
                ) -> tuple[Any, Any]:
    """(the model's inner module, its image processor): `model`'s own when given (the engine
    keeps the language model), else one loaded here without its language model."""
    from transformers import AutoImageProcessor

    inner = (model or load_image_text_model(path, trust_remote_code)).model
    if model is None:
        inner.language_model = None  # the encoder stage never runs it
    processor = AutoImageProcessor.from_pretrained(str(path),
                                                   trust_remote_code=trust_remote_code)
    return inner, processor
