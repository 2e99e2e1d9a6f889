"""Images of chat requests: data URLs only (the server fetches nothing), PNG, JPEG or WebP told
by the bytes' signature (as deployments/models/input_decoding.py tells them for the classify API; this
module imports no torch, the ingress never loads it), sized from the header before any decode.

Each problem is a ChatError naming the image's place (`param`) and what is wrong:
remote_url_not_supported, invalid_image_url, invalid_base64, image_too_large (bytes or pixels),
unsupported_media_type (415: GIF, BMP, ... or a data URL declaring a non-image type),
invalid_image (bytes of no image format, or a header PIL cannot read).
"""

from __future__ import annotations

import base64
import binascii
import io
import re
import warnings
from dataclasses import dataclass, field

from PIL import Image

from deployments.ingress.chat.errors import ChatError
from deployments.ingress.chat.schemas import ChatLimits
from deployments.models.image_bytes import ALLOWED, image_format, other_image_format

MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}
DECLARED_OK = {"image/png", "image/jpeg", "image/jpg", "image/pjpeg", "image/webp"}
DATA_URL = re.compile(r"data:(?P<mime>[^;,]*)(?P<params>(?:;[^;,]*)*),(?P<data>.*)",
                      re.IGNORECASE | re.DOTALL)
EXAMPLE = "data:image/png;base64,iVBORw0KGgo..."


@dataclass(frozen=True)
class ImageInput:
    """One image of a request, in the request's order (`index` 0, 1, ...)."""

    index: int
    media_type: str  # image/png, image/jpeg or image/webp (from the bytes, not the URL)
    width: int
    height: int
    data: bytes = field(repr=False)


def read_image(url: str, index: int, param: str, limits: ChatLimits) -> ImageInput:
    """The image of an `image_url.url` (`param` names it in errors), checked against `limits`."""
    raw = _data_url_bytes(url, param, limits.max_image_bytes)
    fmt = image_format(raw)
    if fmt is None:
        other = other_image_format(raw)
        if other is not None:
            raise ChatError("unsupported_media_type", f"{param}: {other} images are not "
                            f"accepted; send {ALLOWED}", param)
        raise ChatError("invalid_image", f"{param}: not a {ALLOWED} image (unrecognised "
                        "bytes)", param)
    width, height = _size(raw, fmt, param, limits)
    return ImageInput(index, MEDIA_TYPES[fmt], width, height, raw)


def _data_url_bytes(url: str, param: str, max_bytes: int) -> bytes:
    head = url[:16].lstrip().lower()
    if head.startswith(("http://", "https://")):
        raise ChatError("remote_url_not_supported", f"{param}: the server fetches nothing, so "
                        f"remote image URLs are not accepted; send the image inline as a data "
                        f"URL ({EXAMPLE})", param)
    match = DATA_URL.fullmatch(url)
    if match is None:
        raise ChatError("invalid_image_url", f"{param}: not a data URL; expected {EXAMPLE}",
                        param)
    mime = match["mime"].strip().lower()
    params = [p.strip().lower() for p in match["params"].split(";") if p.strip()]
    if "base64" not in params:
        raise ChatError("invalid_image_url", f"{param}: only base64 data URLs are accepted "
                        f"(data:<type>;base64,<data>)", param)
    if mime and mime not in DECLARED_OK:
        what = "images are not accepted" if mime.startswith("image/") else "is not an image"
        raise ChatError("unsupported_media_type", f"{param}: data URL of type {mime!r}: "
                        f"{what}; send {ALLOWED}", param)
    data = match["data"]
    if not data:
        raise ChatError("invalid_base64", f"{param}: the data URL holds no data", param)
    estimate = len(data) * 3 // 4 - data[-2:].count("=")
    if estimate > max_bytes:
        raise ChatError("image_too_large", f"{param}: image of {estimate} bytes; the limit is "
                        f"{max_bytes} bytes", param)
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ChatError("invalid_base64", f"{param}: invalid base64 ({exc}); the standard "
                        "alphabet with padding, no whitespace", param) from None


def _size(raw: bytes, fmt: str, param: str, limits: ChatLimits) -> tuple[int, int]:
    """(width, height) from the header; the whole image decoded too when
    `limits.decode_images`. PIL opens only `fmt` (no other plugin sees the bytes)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(raw), formats=[fmt]) as img:
                width, height = img.size
                if width * height > limits.max_image_pixels:
                    raise ChatError("image_too_large", f"{param}: image of {width}x{height} = "
                                    f"{width * height} pixels; the limit is "
                                    f"{limits.max_image_pixels} pixels", param)
                if limits.decode_images:
                    img.load()
    except ChatError:
        raise
    except (Image.DecompressionBombWarning, Image.DecompressionBombError):
        raise ChatError("image_too_large", f"{param}: image of more than "
                        f"{Image.MAX_IMAGE_PIXELS} pixels; the limit is "
                        f"{limits.max_image_pixels} pixels", param) from None
    except Exception as exc:  # PIL raises many types for corrupt bytes
        raise ChatError("invalid_image", f"{param}: not a decodable {fmt} image "
                        f"({type(exc).__name__}: {exc})", param) from None
    return width, height
