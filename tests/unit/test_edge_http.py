"""The ingress app's own edge, without Ray: 405 with `Allow`, API keys refused by the app itself
(reached without the proxy's front door), strict JSON and numbers -> 400/422, bodies bounded
while they stream, the OpenAPI request bodies, and images limited to PNG/JPEG/WebP (415)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest

from deployments.decode import decode_items
from deployments.ingress.config import HttpConfig
from deployments.ingress.errors import STATUS_BY_TYPE
from deployments.models.base import InputError, UnsupportedMediaType
from deployments.models.image_bytes import check_image_format, image_format
from deployments.models.input_decoding import decode_image
from tests.helpers.classify_http import BODY, client, keyed_client, shed
from tests.helpers.images import image_bytes


def error(r: Any, status: int, type_: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert body["type"] == type_, body
    return str(body["message"])


def test_wrong_method_is_405_with_allow() -> None:
    c = client(shed)
    r = c.get("/v1/classify")
    error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"
    r = c.post("/healthz")
    error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "GET"


def test_the_ingress_refuses_without_a_key_when_reached_directly() -> None:
    c = keyed_client()
    r = c.post("/v1/classify", json=BODY)
    error(r, 401, "missing_api_key")
    assert r.headers["www-authenticate"].startswith("Bearer")
    error(c.post("/v1/classify", json=BODY, headers={"Authorization": "Bearer sk-nope"}),
          401, "invalid_api_key")
    for path in ("/docs", "/openapi.json", "/metrics", "/v1/models"):
        assert c.get(path).status_code == 401
    assert c.get("/healthz").status_code == 200
    ok = c.post("/v1/classify", json=BODY, headers={"Authorization": "Bearer sk-ingress-0001"})
    assert ok.status_code == 200 and ok.json()["status"] == "shed"


@pytest.mark.parametrize(("image", "slo", "status", "type_", "says"), [
    (b'"x"', b'{"latency_ms": NaN}', 400, "malformed_json", "NaN"),
    (b'"x"', b'{"latency_ms": Infinity}', 400, "malformed_json", "Infinity"),
    (b'"x"', b'{"latency_ms": 1e400}', 400, "json_limit_exceeded", "out of range"),
    (b'"x"', b'{"latency_ms": 1' + b"0" * 5000 + b"}", 400, "json_limit_exceeded",
     "characters"),
    (b"[" * 3000 + b"]" * 3000, b'{"latency_ms": 100}', 400, "json_limit_exceeded",
     "deeper than 32"),
    (b"[" * 40 + b"]" * 40, b'{"latency_ms": 100}', 400, "json_limit_exceeded",
     "deeper than 32"),
    (b'"x"', b'{"latency_ms": "100"}', 422, "invalid_slo", "slo.latency_ms"),
    (b'"x"', b'{"latency_ms": 100, "utility": true}', 422, "invalid_slo", "slo.utility"),
])
def test_strict_json_and_numbers(image: bytes, slo: bytes, status: int, type_: str,
                                 says: str) -> None:
    c = client(shed)
    inputs = b'{"image": ' + image + b"}"
    for path, body in (
            ("/v1/classify", b'{"model": "m", "inputs": ' + inputs + b', "slo": ' + slo + b"}"),
            ("/v1/jobs", b'{"model": "m", "items": [' + inputs + b'], "slo": ' + slo + b"}")):
        r = c.post(path, content=body, headers={"content-type": "application/json"})
        assert says in error(r, status, type_)


def test_a_chunked_body_over_the_limit_is_413_at_the_ingress_too() -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(100):
            yield b" " * 4096
    c = client(shed, HttpConfig(max_body_bytes=64 * 1024))
    r = c.post("/v1/classify", content=chunks(), headers={"content-type": "application/json"})
    assert "65536" in error(r, 413, "payload_too_large")


def test_openapi_declares_the_request_and_answer_bodies() -> None:
    doc = client(shed).get("/openapi.json").json()
    schemas = doc["components"]["schemas"]
    for path, request, answer in (("/v1/classify", "ClassifyRequest", "ClassifyResponse"),
                                  ("/v1/jobs", "JobRequest", "JobResponse")):
        post = doc["paths"][path]["post"]
        body = post["requestBody"]["content"]["application/json"]["schema"]
        assert post["requestBody"]["required"] and body == {
            "$ref": f"#/components/schemas/{request}"}
        ok = post["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok == {"$ref": f"#/components/schemas/{answer}"}
        assert "ErrorResponse" in str(post["responses"]["422"])
        assert set(schemas[request]["required"]) >= {"model", "slo"}
    slo = schemas["SLOSpec"]["properties"]["latency_ms"]
    assert slo["type"] == "number" and slo["exclusiveMinimum"] == 0
    assert "$defs" not in str(doc)  # every $ref resolves inside the document


def test_only_png_jpeg_webp_reach_pil() -> None:
    for fmt in ("PNG", "JPEG", "WEBP"):
        raw = image_bytes(fmt)
        assert image_format(raw) == fmt
        assert decode_image(base64.b64encode(raw).decode(), "image", 4, 4).shape == (1, 4, 4)
    for fmt, name in (("GIF", "GIF"), ("EPS", "EPS"), ("BMP", "BMP"), ("TIFF", "TIFF")):
        with pytest.raises(UnsupportedMediaType) as err:
            check_image_format(image_bytes(fmt), "image")
        assert name in str(err.value) and "PNG, JPEG or WebP" in str(err.value)
    with pytest.raises(InputError) as plain:
        check_image_format(b"definitely not a PNG", "image")
    assert not isinstance(plain.value, UnsupportedMediaType)
    # a PNG signature in front of another format's bytes: PIL is asked for PNG only
    with pytest.raises(InputError, match="not a decodable image"):
        decode_image(base64.b64encode(b"\x89PNG\r\n\x1a\n" + image_bytes("GIF")).decode(),
                     "image", 4, 4)


def test_an_unsupported_image_is_a_415_problem_naming_the_item() -> None:
    class Model:
        def decode(self, inputs: dict[str, Any], task: str) -> dict[str, Any]:
            return {"image": decode_image(inputs["image"], "image", 4, 4)}

    gif = base64.b64encode(image_bytes("GIF")).decode()
    png = base64.b64encode(image_bytes("PNG")).decode()
    result = decode_items(Model(), "t", ({"image": png}, {"image": gif}))
    assert result.problem is not None and result.problem.type == "unsupported_media_type"
    assert result.problem.field == "items[1]" and "GIF" in result.problem.message
    assert STATUS_BY_TYPE["unsupported_media_type"] == 415
