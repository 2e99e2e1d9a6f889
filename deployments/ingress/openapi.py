"""The OpenAPI document (`/openapi.json`) with the request and answer bodies the POST handlers
use: they read the raw body themselves (clock first, then strict JSON: service.parse_body), so
FastAPI sees no body parameter and would declare none. Declared here from the same pydantic
models that validate them, so a client generator or a fuzzer (schemathesis) reaches them; how
a body is parsed does not change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel

REF = "#/components/schemas/{model}"


def declare_bodies(app: FastAPI, routes: Mapping[str, tuple[type[BaseModel], type[BaseModel]]],
                   error: type[BaseModel]) -> None:
    """`routes`: POST path -> (request model, 200 answer model); every 4xx/5xx answer is an
    `error` body."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()  # FastAPI's own (cached on the app: edited in place once)
        for path, (request, answer) in routes.items():
            post = schema["paths"][path]["post"]
            post["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": _ref(schema, request, "validation")}}}
            responses = post.setdefault("responses", {})
            responses["200"] = {"description": "the answer (status ok, deadline_exceeded, shed, "
                                               "or error for a job's item)",
                                "content": _json(_ref(schema, answer, "serialization"))}
            for kind in ("4XX", "5XX"):
                responses[kind] = {"description": "an ErrorResponse (docs/serving.md, Errors)",
                                   "content": _json(_ref(schema, error, "serialization"))}
        return schema
    app.openapi = openapi  # type: ignore[method-assign]


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _ref(document: dict[str, Any], model: type[BaseModel], mode: str) -> dict[str, str]:
    """`model` (and the models it uses) added to the document's components; a $ref to it."""
    schema = model.model_json_schema(ref_template=REF, mode=mode)  # type: ignore[arg-type]
    components = document.setdefault("components", {}).setdefault("schemas", {})
    for name, sub in schema.pop("$defs", {}).items():
        components.setdefault(name, sub)
    components.setdefault(model.__name__, schema)
    return {"$ref": REF.format(model=model.__name__)}
