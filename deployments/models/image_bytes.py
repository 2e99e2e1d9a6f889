"""Image bytes as every path takes them, without torch (the ingress imports it): PNG, JPEG or
WebP told by their signature, other image formats refused by name, and a checked opening
(size limit, decompression bombs, corrupt bytes: each a clear error)."""

from __future__ import annotations

import io
import warnings

from PIL import Image

from deployments.models.input_errors import InputError, UnsupportedMediaType

ALLOWED = "PNG, JPEG or WebP"
# signatures of image formats refused by name (415); anything else unknown is not an image (422)
OTHER_IMAGES = ((b"GIF87a", "GIF"), (b"GIF89a", "GIF"), (b"BM", "BMP"), (b"II*\x00", "TIFF"),
                (b"MM\x00*", "TIFF"), (b"%!PS", "PostScript/EPS"),
                (b"\xc5\xd0\xd3\xc6", "EPS"), (b"%PDF", "PDF"), (b"\x00\x00\x01\x00", "ICO"),
                (b"8BPS", "PSD"), (b"\x00\x00\x00\x0cjP  ", "JPEG 2000"), (b"qoif", "QOI"),
                (b"\x76\x2f\x31\x01", "OpenEXR"), (b"#define", "XBM"), (b"/* XPM */", "XPM"))


def image_format(raw: bytes) -> str | None:
    """PIL's name of an accepted format (PNG, JPEG, WEBP) told by the bytes' signature; None:
    not one of them."""
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "PNG"
    if raw.startswith(b"\xff\xd8\xff"):
        return "JPEG"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "WEBP"
    return None


def other_image_format(raw: bytes) -> str | None:
    """The name of an image format refused by name (GIF, BMP, TIFF, HEIF/AVIF, ...), by its
    signature; None: none known here."""
    other = next((name for magic, name in OTHER_IMAGES if raw.startswith(magic)), None)
    if other is None and raw[4:8] == b"ftyp":
        return "HEIF/AVIF"
    return other


def open_checked_image(raw: bytes, field: str, max_side: int, mode: str) -> Image.Image:
    """A PIL image in `mode` ("L", "RGB") from PNG/JPEG/WebP bytes: UnsupportedMediaType for
    other image formats, InputError for anything that is not a decodable image of at most
    `max_side` pixels a side (decompression bombs included)."""
    fmt = check_image_format(raw, field)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(raw), formats=[fmt]) as img:
                if max(img.size) > max_side:
                    raise InputError(f"{field}: image {img.size[0]}x{img.size[1]} exceeds "
                                     f"{max_side}x{max_side}")
                return img.convert(mode)
    except InputError:
        raise
    except Exception as exc:  # PIL raises many types for corrupt bytes
        raise InputError(f"{field}: not a decodable image ({type(exc).__name__})") from None


def check_image_format(raw: bytes, field: str) -> str:
    """The accepted format of `raw`, else UnsupportedMediaType (another image format, named)
    or InputError (no image format known here)."""
    found = image_format(raw)
    if found is not None:
        return found
    other = other_image_format(raw)
    if other is not None:
        raise UnsupportedMediaType(f"{field}: {other} images are not accepted; send {ALLOWED}")
    raise InputError(f"{field}: not a {ALLOWED} image (unrecognised bytes)")
