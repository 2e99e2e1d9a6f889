"""The malformed set of the reliability benchmark: about 60 bad requests (wrong types,
non-finite and huge numbers, deep nesting, bad base64, images other than PNG/JPEG/WebP, bad
jobs, wrong methods, unknown routes) built from one valid single request. Every one should get
a 4xx JSON error, never a 5xx. Pure apart from PIL encoding small images."""

from __future__ import annotations

import base64
import copy
import io
import json
from dataclasses import dataclass
from typing import Any

JSON_TYPE = "application/json"


@dataclass(frozen=True)
class BadRequest:
    name: str
    method: str
    path: str
    body: bytes | None = None
    content_type: str = JSON_TYPE


def image_b64(fmt: str) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("L", (28, 28), 0).save(buf, format=fmt)
    return base64.b64encode(buf.getvalue()).decode()


def _with(valid: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A copy of `valid` with the field at `path` set (or removed when value is DELETE)."""
    out = copy.deepcopy(valid)
    node = out
    for key in path[:-1]:
        node = node.setdefault(key, {})
    if value is DELETE:
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return out


DELETE = object()
RAW_SLO = "__RAW_SLO__"


def _raw_slo(valid: dict[str, Any], raw: bytes) -> bytes:
    return json.dumps(_with(valid, ("slo", "latency_ms"), RAW_SLO)).encode().replace(
        b'"' + RAW_SLO.encode() + b'"', raw)


def _field_cases(valid: dict[str, Any], image_key: str) -> list[tuple[str, Any]]:
    """(name, body) of single requests with one field wrong."""
    img = ("inputs", image_key)
    return [
        ("model_number", _with(valid, ("model",), 42)),
        ("model_null", _with(valid, ("model",), None)),
        ("model_unknown", _with(valid, ("model",), "gpt-17")),
        ("model_missing", _with(valid, ("model",), DELETE)),
        ("inputs_list", _with(valid, ("inputs",), ["not", "a", "dict"])),
        ("inputs_string", _with(valid, ("inputs",), "image")),
        ("inputs_missing", _with(valid, ("inputs",), DELETE)),
        ("inputs_empty", _with(valid, ("inputs",), {})),
        ("slo_string", _with(valid, ("slo",), "fast")),
        ("slo_list", _with(valid, ("slo",), [200])),
        ("latency_word", _with(valid, ("slo", "latency_ms"), "fast")),
        ("latency_numeric_string", _with(valid, ("slo", "latency_ms"), "100")),
        ("latency_bool", _with(valid, ("slo", "latency_ms"), True)),
        ("latency_null", _with(valid, ("slo", "latency_ms"), None)),
        ("latency_zero", _with(valid, ("slo", "latency_ms"), 0)),
        ("latency_negative", _with(valid, ("slo", "latency_ms"), -5)),
        ("latency_below_fastest", _with(valid, ("slo", "latency_ms"), 1e-6)),
        ("min_accuracy_over_one", _with(valid, ("slo", "min_accuracy"), 1.5)),
        ("extra_field", _with(valid, ("priority",), 3)),
        ("task_unknown", _with(valid, ("task",), "astrology")),
        ("task_number", _with(valid, ("task",), 7)),
        ("modality_unknown", _with(valid, ("inputs", "smell"), "roses")),
        ("image_bad_base64", _with(valid, img, "!!! not base64 @@@")),
        ("image_not_an_image", _with(valid, img, base64.b64encode(b"not a PNG").decode())),
        ("image_empty", _with(valid, img, "")),
        ("image_number", _with(valid, img, 12345)),
        ("image_null", _with(valid, img, None)),
        ("image_truncated_png", _with(valid, img, image_b64("PNG")[:40])),
        *((f"image_{fmt.lower()}", _with(valid, img, image_b64(fmt)))
          for fmt in ("GIF", "EPS", "BMP", "TIFF", "ICO", "PPM")),
    ]


def _raw_cases(valid: dict[str, Any]) -> list[tuple[str, bytes]]:
    """(name, body bytes) of single requests whose bytes are not the JSON we ask for."""
    good = json.dumps(valid).encode()
    deep = json.dumps(_with(valid, ("inputs",), "DEEP")).encode()
    return [
        ("json_truncated", good[: len(good) // 2]),
        ("json_empty", b""),
        ("json_null", b"null"), ("json_list", b"[]"), ("json_number", b"42"),
        ("json_string", b'"classify"'), ("json_true", b"true"),
        ("json_trailing_garbage", good + b"}}"),
        ("json_invalid_utf8", b'{"model": "\xff\xfe"}'),
        ("json_single_quotes", good.replace(b'"', b"'")),
        ("latency_nan", _raw_slo(valid, b"NaN")),
        ("latency_infinity", _raw_slo(valid, b"Infinity")),
        ("latency_minus_infinity", _raw_slo(valid, b"-Infinity")),
        ("latency_1e400", _raw_slo(valid, b"1e400")),
        ("latency_5000_digits", _raw_slo(valid, b"1" + b"0" * 5000)),
        ("latency_huge_exponent", _raw_slo(valid, b"1e999999999")),
        ("nesting_5000_lists", deep.replace(b'"DEEP"', b"[" * 5000 + b"]" * 5000)),
        ("nesting_100000_lists", deep.replace(b'"DEEP"', b"[" * 100_000 + b"]" * 100_000)),
        ("nesting_5000_objects", deep.replace(b'"DEEP"', b'{"a":' * 5000 + b"1" + b"}" * 5000)),
    ]


def _job_cases(valid: dict[str, Any]) -> list[tuple[str, Any]]:
    inputs = valid["inputs"]
    job = {"model": valid["model"], "items": [inputs, inputs], "slo": valid["slo"]}
    return [
        ("job_empty", {**job, "items": []}),
        ("job_items_null", {**job, "items": None}),
        ("job_items_dict", {**job, "items": inputs}),
        ("job_bad_item", {**job, "items": [inputs, {**inputs, "x": 1}, "%%%"]}),
        ("job_over_item_cap", {**job, "items": [inputs] * 257}),
        ("job_latency_nan_string", {**job, "slo": {"latency_ms": "NaN"}}),
    ]


ROUTE_CASES: tuple[tuple[str, str, str], ...] = (
    ("get_classify", "GET", "/v1/classify"), ("put_classify", "PUT", "/v1/classify"),
    ("delete_models", "DELETE", "/v1/models"), ("get_jobs", "GET", "/v1/jobs"),
    ("post_healthz", "POST", "/healthz"), ("patch_status", "PATCH", "/v1/status"),
    ("unknown_route", "GET", "/v1/nothing"), ("unknown_version", "POST", "/v2/classify"),
    ("classify_subpath", "POST", "/v1/classify/extra"), ("dot_dot", "GET", "/v1/../../etc/passwd"),
)


def malformed_set(valid: dict[str, Any], image_key: str = "image") -> list[BadRequest]:
    """The malformed set around `valid` (a correct /v1/classify body whose inputs hold an image
    under `image_key`)."""
    out = [BadRequest(n, "POST", "/v1/classify", json.dumps(b).encode())
           for n, b in _field_cases(valid, image_key)]
    out += [BadRequest(n, "POST", "/v1/classify", b) for n, b in _raw_cases(valid)]
    out += [BadRequest(n, "POST", "/v1/jobs", json.dumps(b).encode())
            for n, b in _job_cases(valid)]
    out.append(BadRequest("content_type_text", "POST", "/v1/classify",
                          json.dumps(_with(valid, ("slo", "latency_ms"), "x")).encode(),
                          "text/plain"))
    body = json.dumps(valid).encode()
    out += [BadRequest(n, m, p, body if m in ("POST", "PUT", "PATCH") else None)
            for n, m, p in ROUTE_CASES]
    return out
