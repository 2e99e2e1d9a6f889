"""Solid images encoded as the API receives them: raw bytes, base64, a data URL."""

from __future__ import annotations

import base64
import io

from PIL import Image

Color = int | tuple[int, int, int]


def image_bytes(fmt: str = "PNG", size: tuple[int, int] = (28, 28), color: Color = 0) -> bytes:
    """A `size` (width, height) image of one colour in format `fmt` (PIL's name: PNG, JPEG,
    WEBP, GIF, ...): greyscale ("L") for an int colour, RGB for a triple."""
    buf = io.BytesIO()
    Image.new("L" if isinstance(color, int) else "RGB", size, color).save(buf, format=fmt)
    return buf.getvalue()


def image_b64(fmt: str = "PNG", size: tuple[int, int] = (28, 28), color: Color = 0) -> str:
    """`image_bytes`, base64 (an image field of the classify API)."""
    return base64.b64encode(image_bytes(fmt, size, color)).decode()


def data_url(raw: bytes, mime: str = "image/png") -> str:
    """A base64 data URL (an image part of the chat API)."""
    return f"data:{mime};base64,{base64.b64encode(raw).decode()}"
