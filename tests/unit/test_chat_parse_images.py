"""The chat API's request layer on images (deployments/ingress/chat/parse.py): bad data URLs,
other formats, remote URLs, too many, too large by header or bytes, each image's own token
count, a model that takes none; good requests keep their images in order."""

from __future__ import annotations

import base64
import json
import struct
import zlib

import pytest

from deployments.ingress.chat.messages import ImageSlot, TextSlot
from deployments.ingress.chat.parse import ContextCheck, parse_chat
from deployments.ingress.chat.schemas import ChatLimits
from tests.helpers.chat_requests import LIMITS, MODELS, PNG, TEXT, body, image_part, refused
from tests.helpers.images import data_url, image_bytes

# ---- images ----

@pytest.mark.parametrize("url, code, words", [
    ("not a url", "invalid_image_url", "not a data URL"),
    ("data:image/png,%89PNG", "invalid_image_url", "only base64 data URLs"),
    ("file:///etc/passwd", "invalid_image_url", "not a data URL"),
    ("data:image/png;base64,", "invalid_base64", "holds no data"),
    ("data:image/png;base64,iVBORw0K$$$", "invalid_base64", "invalid base64"),
    ("data:image/png;base64,aGVsbG8gd29ybGQ=", "invalid_image", "unrecognised bytes"),
    ("data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 40).decode(),
     "invalid_image", "not a decodable PNG"),
])
def test_bad_data_url_base64_or_bytes(url: str, code: str, words: str) -> None:
    err = refused(body(TEXT, image_part(url)))
    assert (err.status, err.code) == (400, code)
    assert words in err.message and err.param == "messages[0].content[1].image_url.url"
    assert err.message.startswith(err.param)


@pytest.mark.parametrize("url, name", [
    (data_url(image_bytes("GIF"), "image/png"), "GIF"),  # told by the bytes, not the URL
    (data_url(image_bytes("BMP"), ""), "BMP"),
    (data_url(image_bytes(), "image/gif"), "'image/gif'"),  # declared: refused before decode
    (data_url(b"hello", "text/plain"), "is not an image"),
])
def test_other_image_formats_are_415_as_in_classify(url: str, name: str) -> None:
    err = refused(body(image_part(url), TEXT))
    assert (err.status, err.code) == (415, "unsupported_media_type")
    assert name in err.message and "PNG, JPEG or WebP" in err.message


@pytest.mark.parametrize("url", ["https://example.com/cat.png", "http://10.0.0.1/x.jpg",
                                 "  HTTPS://EXAMPLE.COM/x"])
def test_remote_url_names_that_the_server_fetches_nothing(url: str) -> None:
    err = refused(body(image_part(url), TEXT))
    assert (err.status, err.code) == (400, "remote_url_not_supported")
    assert "fetches nothing" in err.message and "data:image/png;base64" in err.message


def test_too_many_images_is_refused_before_any_is_read() -> None:
    bad = image_part("data:image/png;base64,!!!")  # never read: the count comes first
    err = refused(body(*[bad] * 9, TEXT))
    assert (err.status, err.code) == (400, "too_many_images")
    assert "9 images" in err.message and "at most 8" in err.message


def test_image_over_the_pixel_limit_from_its_header() -> None:
    limits = ChatLimits(max_image_pixels=64 * 64)
    err = refused(body(image_part(data_url(image_bytes(size=(65, 64)))), TEXT), limits)
    assert (err.status, err.code) == (400, "image_too_large")
    assert "65x64 = 4160 pixels" in err.message and "4096" in err.message
    assert parse_chat(body(image_part(data_url(image_bytes(size=(64, 64)))), TEXT), limits,
                      MODELS).images[0].width == 64


def png_header(width: int, height: int) -> bytes:
    """A PNG that claims `width` x `height` in a few bytes (a decompression bomb's header)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(
            ">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("side", [2000, 10_000, 20_000])  # ours, PIL's warning, PIL's error
def test_a_small_image_claiming_many_pixels(side: int) -> None:
    err = refused(body(image_part(data_url(png_header(side, side))), TEXT))
    assert (err.status, err.code) == (400, "image_too_large") and "pixels" in err.message


def test_image_over_the_byte_limit_before_decoding() -> None:
    raw = image_bytes("PNG", size=(200, 200))
    err = refused(body(image_part(data_url(raw)), TEXT), ChatLimits(max_image_bytes=len(raw) - 1))
    assert (err.status, err.code) == (400, "image_too_large")
    assert f"{len(raw)} bytes" in err.message and f"limit is {len(raw) - 1}" in err.message


def test_each_image_counts_its_own_tokens_and_a_size_the_model_refuses_is_a_400() -> None:
    """Dynamic resolution (Qwen-VL): the adapter's count per image, from its size."""
    from deployments.engines.architectures import model_facts

    facts = model_facts({"model_type": "qwen2_vl", "image_token_id": 5, "hidden_size": 8,
                         "vision_config": {"patch_size": 14, "spatial_merge_size": 2}})
    ctx = ContextCheck(4096, lambda p, t: len(p.split()) + sum(t), lambda msgs: json.dumps(msgs),
                       facts.tokens_for, image_placeholder="IMG")
    wide = data_url(image_bytes("PNG", size=(1000, 4)))
    req = parse_chat(body(image_part(data_url(image_bytes("PNG", size=(60, 100)))),
                          image_part(data_url(image_bytes("PNG", size=(448, 448)))), TEXT),
                     LIMITS, MODELS, context=ctx)
    assert req.image_tokens == (8, 256)
    err = refused(body(image_part(wide), TEXT), context=ctx)
    assert (err.status, err.code) == (400, "invalid_image") and "aspect ratio" in err.message


def test_one_image() -> None:
    req = parse_chat(body(image_part(PNG), TEXT), LIMITS, MODELS)
    assert req.model == "vlm" and req.request_id.startswith("chatcmpl-")
    (img,) = req.images
    assert (img.index, img.media_type, img.width, img.height) == (0, "image/png", 28, 28)
    assert img.data == image_bytes()
    assert req.turns[0].parts == (ImageSlot(0), TextSlot("read the digits"))
    assert (req.max_tokens, req.stream, req.include_usage) == (256, False, False)
    assert req.ttft_slo_ms == LIMITS.default_ttft_slo_ms


def test_several_images_keep_their_order() -> None:
    raws = [image_bytes("PNG", color=(10, 245, 7)), image_bytes("JPEG", color=(90, 165, 7)),
            image_bytes("WEBP", color=(200, 55, 7)), image_bytes("PNG", size=(30, 20))]
    parts = [image_part(data_url(r)) for r in raws]
    req = parse_chat(body(parts[0], TEXT, *parts[1:]), ChatLimits(decode_images=True), MODELS)
    assert [i.data for i in req.images] == raws
    assert [i.index for i in req.images] == [0, 1, 2, 3]
    assert [i.media_type for i in req.images] == ["image/png", "image/jpeg", "image/webp",
                                                  "image/png"]
    assert (req.images[3].width, req.images[3].height) == (30, 20)
    assert req.turns[0].parts == (ImageSlot(0), TextSlot("read the digits"), ImageSlot(1),
                                  ImageSlot(2), ImageSlot(3))


def test_a_text_only_model_refuses_images_saying_so() -> None:
    """A model that takes no images (the ingress sets max_images 0 for it): a 400 that says so,
    not "at most 0 images"; text alone is served."""
    text_only = ChatLimits(max_images=0)
    err = refused(body(image_part(PNG), TEXT), text_only)
    assert (err.status, err.code, err.param) == (400, "too_many_images", "messages")
    assert "takes no images" in err.message
    assert parse_chat(body(TEXT), text_only, MODELS).num_images == 0
