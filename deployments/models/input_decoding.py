"""Wire formats shared by the model families: JSON values in, tensors out (or `InputError`).

- image: a base64 string (standard alphabet, padding required, no data-URL prefix) of PNG, JPEG or
  WebP bytes, grayscale or colour (converted to 8-bit grayscale, "L"), any size up to 1024x1024
  (resized bilinearly to the model's size). Bright ink on a dark background; pixel value 255 =
  full ink. The format is told by the bytes' signature before PIL sees them, and PIL opens only
  those three: another image format (GIF, EPS, ...) is `UnsupportedMediaType` (415), bytes of
  no known image format an `InputError` (422); PIL's other plugins (EPS runs ghostscript) are
  never reached.
- audio: a JSON list of exactly the expected number of finite numbers (no NaN/inf, no booleans).
- text: a non-empty string of at most `max_words` whitespace-separated words.

Every decode error is an `InputError` whose message starts with the field name.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from collections.abc import Iterable, Mapping
from typing import Any

import torch
from PIL import Image

from deployments.models.base import InputError
from deployments.models.image_bytes import open_checked_image

MAX_IMAGE_SIDE = 1024
MAX_IMAGE_B64_CHARS = 4 * 1024 * 1024
IMAGE_FORMATS = ("PNG", "JPEG", "WEBP")  # PIL's names of the formats accepted


def check_fields(inputs: Any, required: Iterable[str], allowed: Iterable[str]) -> Mapping[str, Any]:
    """`inputs` must be a dict with every `required` key and only `allowed` keys."""
    if not isinstance(inputs, Mapping):
        raise InputError(f"inputs: expected an object of modality -> value, got "
                         f"{type(inputs).__name__}")
    allowed_set = set(allowed)
    unknown = sorted(str(k) for k in inputs if k not in allowed_set)
    if unknown:
        raise InputError(f"{unknown[0]}: unknown modality (expected one of "
                         f"{sorted(allowed_set)})")
    missing = [k for k in required if k not in inputs]
    if missing:
        raise InputError(f"{missing[0]}: missing required modality")
    return inputs


def check_task(task: Any, tasks: Iterable[str]) -> str:
    known = tuple(tasks)
    if not isinstance(task, str) or task not in known:
        raise InputError(f"task: unknown task {task!r} (expected one of {list(known)})")
    return task


def encode_image(pixels: torch.Tensor) -> str:
    """base64 PNG of a uint8 [H, W] grayscale image (the canonical wire form)."""
    if pixels.dtype != torch.uint8 or pixels.dim() != 2:
        raise ValueError("encode_image expects a uint8 [H, W] tensor")
    buf = io.BytesIO()
    Image.fromarray(pixels.cpu().numpy(), mode="L").save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def decode_image(value: Any, field: str, height: int, width: int) -> torch.Tensor:
    """float32 [1, height, width] in [0, 1] from a base64 image string."""
    return decode_pixels(value, field, height, width, "L")


def decode_pixels(value: Any, field: str, height: int, width: int, mode: str) -> torch.Tensor:
    """float32 [channels, height, width] in [0, 1] from a base64 image string, in PIL `mode`
    ("L": 1 channel, "RGB": 3), resized bilinearly when its size differs."""
    if not isinstance(value, str):
        raise InputError(f"{field}: expected a base64 string, got {type(value).__name__}")
    if not value:
        raise InputError(f"{field}: empty string")
    if len(value) > MAX_IMAGE_B64_CHARS:
        raise InputError(f"{field}: base64 longer than {MAX_IMAGE_B64_CHARS} characters")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InputError(f"{field}: invalid base64 ({exc})") from None
    img = open_checked_image(raw, field, MAX_IMAGE_SIDE, mode)
    if img.size != (width, height):
        img = img.resize((width, height), Image.Resampling.BILINEAR)
    data = bytes(img.tobytes())
    pixels = torch.frombuffer(bytearray(data), dtype=torch.uint8).reshape(height, width, -1)
    return pixels.permute(2, 0, 1).float().div(255.0)


def decode_floats(value: Any, field: str, length: int) -> torch.Tensor:
    """float32 [length] from a JSON list of finite numbers of exactly `length` items."""
    if not isinstance(value, list | tuple):
        raise InputError(f"{field}: expected a list of {length} numbers, got "
                         f"{type(value).__name__}")
    if len(value) != length:
        raise InputError(f"{field}: expected {length} samples, got {len(value)}")
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InputError(f"{field}: item {i} is {type(v).__name__}, expected a number")
        if not math.isfinite(v):
            raise InputError(f"{field}: item {i} is not finite ({v})")
    try:
        out = torch.tensor(value, dtype=torch.float32)
    except (OverflowError, RuntimeError) as exc:
        raise InputError(f"{field}: not representable as float32 ({exc})") from None
    if not bool(torch.isfinite(out).all()):
        raise InputError(f"{field}: values overflow float32")
    return out


def decode_text(value: Any, field: str, max_words: int) -> str:
    """The validated text (non-empty, at most `max_words` words)."""
    if not isinstance(value, str):
        raise InputError(f"{field}: expected a string, got {type(value).__name__}")
    words = value.split()
    if not words:
        raise InputError(f"{field}: empty text")
    if len(words) > max_words:
        raise InputError(f"{field}: {len(words)} words, at most {max_words} allowed")
    return value
