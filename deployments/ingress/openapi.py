"""The OpenAPI document (`/openapi.json`), written to be true of this server, so a client
generator or a fuzzer (scripts/fuzz.sh runs schemathesis against it) can rely on it:

- the request bodies of the POST routes: their handlers read the raw body themselves (clock
  first, then strict JSON: service.parse_body), so FastAPI sees no body parameter and would
  declare none. Declared from the pydantic models that validate them, narrowed to what this
  deployment serves (`model` and `task` from the catalog, `inputs` by modality, the job cap),
  so generated requests reach the families instead of stopping at `unknown_model`;
- every answer a route gives: the 200 body (GET routes too: answers.py; `/metrics` is text),
  and each error status with the `ErrorResponse` body and what it means (docs/serving.md,
  Errors), `Retry-After` on 429/503, `WWW-Authenticate` on 401;
- an example request per family that takes an image alone (a small PNG made here), so the
  docs show a working request and a fuzzer's first cases get a 200 from a model;
- POST /v1/chat/completions where a chat model is served (chat/openapi.py);
- the API keys, when any are configured: a `bearer` security scheme on every route but
  `/healthz` (and `/metrics` when `auth.protect_metrics` is false).

How a request is parsed or answered does not change here."""

from __future__ import annotations

import base64
import struct
import zlib
from typing import Any, Literal

from fastapi import FastAPI
from pydantic import BaseModel

from deployments.ingress.answers import HealthResponse, ModelsResponse, StatusResponse
from deployments.ingress.chat.openapi import declare_chat
from deployments.ingress.classify.catalog import Catalog
from deployments.ingress.classify.schemas import (
    ClassifyRequest,
    ClassifyResponse,
    JobRequest,
    JobResponse,
)
from deployments.ingress.errors import ErrorResponse
from deployments.ingress.proxy.auth import METRICS_PATH, OPEN_PATHS, ApiKeys

REF = "#/components/schemas/{model}"
SCHEME = "bearer"
BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
# each modality's wire form (deployments/models/input_decoding.py)
MODALITIES: dict[str, dict[str, Any]] = {
    "image": {"type": "string", "pattern": BASE64, "contentEncoding": "base64",
              "description": "base64 (standard alphabet, padded) of PNG, JPEG or WebP bytes"},
    "audio": {"type": "array", "items": {"type": "number"},
              "description": "the family's number of finite samples"},
    "text": {"type": "string", "minLength": 1, "description": "whitespace-separated words"},
}
BODY_ERRORS = {
    400: "malformed_json (not JSON, NaN/Infinity), json_limit_exceeded (too deep, a number too "
         "long or out of range), incomplete_body",
    404: "unknown_model",
    408: "body_timeout: the body did not all arrive within body_read_timeout_s",
    413: "payload_too_large, job_too_large",
    415: "unsupported_media_type: an image that is not PNG, JPEG or WebP",
    422: "invalid_request, invalid_slo, unknown_task, missing_modality, unknown_modality, "
         "invalid_input, slo_unachievable",
    429: "overloaded: admission refused it before any work, or the proxy's queue is full "
         "with http.backpressure_status_code 429 (Retry-After)",
    500: "internal_error: a server fault",
    503: "overloaded (the proxy: its queue is full, too many bodies arriving), unavailable "
         "(the family has no live replica), replica_unavailable (Retry-After when known)",
}
OVERLOADED = "overloaded: the proxy's queue is full (Retry-After)"
BACKPRESSURE_429 = "overloaded: the proxy's queue is full, with http.backpressure_status_code 429"


def _get_errors(more_503: str = "") -> dict[int, str]:
    """A GET route's errors: its own fault, the proxy's backpressure (503 or 429: config)."""
    return {429: BACKPRESSURE_429, 500: "internal_error", 503: more_503 + OVERLOADED}


GET_ROUTES: dict[str, tuple[type[BaseModel] | None, dict[int, str]]] = {
    "/v1/models": (ModelsResponse, _get_errors()),
    "/v1/status": (StatusResponse, _get_errors("controller_unavailable; ")),
    "/healthz": (HealthResponse, _get_errors("not_ready (replicas starting), unavailable (no "
                                             "family has a live replica); ")),
    METRICS_PATH: (None, _get_errors()),
}
POST_ROUTES: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "/v1/classify": (ClassifyRequest, ClassifyResponse),
    "/v1/jobs": (JobRequest, JobResponse)}
HEADERS: dict[int, dict[str, Any]] = {
    429: {"Retry-After": {"description": "seconds", "schema": {"type": "string",
                                                               "pattern": "^[0-9]+$"}}},
    401: {"WWW-Authenticate": {"required": True, "schema": {"type": "string"}}},
}
HEADERS[503] = HEADERS[429]


def declare_api(app: FastAPI, catalog: Catalog, max_items_per_job: int,
                keys: ApiKeys | None = None) -> None:
    """Replaces FastAPI's document with the one above (built once, on first request)."""
    build = app.openapi
    secured = keys is not None and not keys.open

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = build()  # FastAPI's own (cached on the app: edited in place once)
        for path, (request, answer) in POST_ROUTES.items():
            post = doc["paths"][path]["post"]
            content = _json(_ref(doc, request))
            examples = _examples(catalog, job=path == "/v1/jobs")
            if examples:
                content["application/json"]["examples"] = examples
            post["requestBody"] = {"required": True, "content": content}
            post["responses"] = _responses(doc, answer, BODY_ERRORS)
        for path, (model, errors) in GET_ROUTES.items():
            get = doc["paths"][path]["get"]
            get["responses"] = _responses(doc, model, errors)
        if METRICS_PATH in doc["paths"]:
            doc["paths"][METRICS_PATH]["get"]["responses"]["200"]["content"] = {
                "text/plain": {"schema": {"type": "string"}}}
        _narrow(doc["components"]["schemas"], catalog, max_items_per_job)
        declare_chat(doc)  # where the app serves a chat model
        if secured:
            assert keys is not None
            _secure(doc, keys)
        return doc
    app.openapi = openapi  # type: ignore[method-assign]


def _responses(doc: dict[str, Any], answer: type[BaseModel] | None,
               errors: dict[int, str]) -> dict[str, Any]:
    ok = _ref(doc, answer) if answer is not None else {}
    out: dict[str, Any] = {"200": {"description": "the answer", "content": _json(ok)}}
    error = _ref(doc, ErrorResponse)
    for status, why in sorted(errors.items()):
        out[str(status)] = _error(status, why, error)
    return out


def _error(status: int, why: str, error: dict[str, str]) -> dict[str, Any]:
    out = {"description": f"an ErrorResponse; error.type: {why}", "content": _json(error)}
    if status in HEADERS:
        out["headers"] = HEADERS[status]
    return out


def _narrow(schemas: dict[str, Any], catalog: Catalog, max_items_per_job: int) -> None:
    """The request bodies as this deployment serves them: its families, their tasks, the
    modalities' wire forms (which ones a family needs: GET /v1/models), the job cap."""
    names = catalog.names()
    tasks = sorted({t for f in catalog.families for t in f.task_names()})
    modalities = sorted({m for f in catalog.families for m in f.modalities})
    inputs = {"type": "object", "minProperties": 1, "additionalProperties": False,
              "properties": {m: MODALITIES.get(m, {}) for m in modalities},
              "description": "one item's inputs by modality; a family needs all of its "
                             "modalities (GET /v1/models)"}
    for name, key in (("ClassifyRequest", "inputs"), ("JobRequest", "items")):
        props = schemas[name]["properties"]
        if names:
            props["model"] = {**props["model"], "enum": names}
        if tasks:
            props["task"] = {"anyOf": [{"type": "string", "enum": tasks}, {"type": "null"}],
                             "default": None, "description": "a task of the family (default: "
                                                             "its first)"}
        if key == "inputs":
            props[key] = {**inputs, "title": "Inputs"}
        else:
            props[key] = {**props[key], "items": inputs, "maxItems": max_items_per_job}


def _examples(catalog: Catalog, job: bool) -> dict[str, Any]:
    """A request to each family whose only modality is an image (SLO: 1 s)."""
    image = base64.b64encode(tiny_png()).decode()
    out: dict[str, Any] = {}
    for family in catalog.families:
        if tuple(family.modalities) == ("image",):
            inputs = {"image": image}
            body: dict[str, Any] = {"model": family.name, "slo": {"latency_ms": 1000.0}}
            body.update({"items": [inputs, inputs]} if job else {"inputs": inputs})
            out[family.name] = {"summary": f"{family.name}, a 16x16 PNG", "value": body}
    return out


def tiny_png(side: int = 16) -> bytes:
    """A `side` x `side` 8-bit grayscale PNG: a bright bar on black (zlib, no PIL)."""
    rows = b"".join(b"\x00" + bytes(255 if side // 3 <= x < side // 2 else 0
                                     for x in range(side)) for _ in range(side))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data)))
    header = struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
            + chunk(b"IEND", b""))


def _secure(doc: dict[str, Any], keys: ApiKeys) -> None:
    doc.setdefault("components", {})["securitySchemes"] = {SCHEME: {
        "type": "http", "scheme": "bearer",
        "description": "an API key: `Authorization: Bearer <key>` (docs/serving.md, API keys)"}}
    open_paths = set(OPEN_PATHS) | (set() if keys.protect_metrics else {METRICS_PATH})
    error = _ref(doc, ErrorResponse)
    for path, item in doc["paths"].items():
        for op in item.values():
            if path in open_paths:
                op["security"] = []
                continue
            op["security"] = [{SCHEME: []}]
            op["responses"]["401"] = _error(401, "missing_api_key, invalid_api_key", error)
            op["responses"] = dict(sorted(op["responses"].items()))


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _ref(document: dict[str, Any], model: type[BaseModel]) -> dict[str, str]:
    """`model` (and the models it uses) added to the document's components; a $ref to it.
    Request models in their validation form, answers in their serialization form."""
    mode: Literal["validation", "serialization"] = (
        "validation" if model in (ClassifyRequest, JobRequest) else "serialization")
    schema = model.model_json_schema(ref_template=REF, mode=mode)
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for name, sub in schema.pop("$defs", {}).items():
        components.setdefault(name, sub)
    components.setdefault(model.__name__, schema)
    return {"$ref": REF.format(model=model.__name__)}
