"""HTTP error answers: every failure becomes one `ErrorResponse` JSON body with a status code.

| type                 | status | when |
|----------------------|--------|------|
| malformed_json       | 400    | body is not JSON (NaN/Infinity are not JSON numbers) |
| json_limit_exceeded  | 400    | nested deeper than http.max_json_depth, a number too long or out of range |
| incomplete_body      | 400    | the client went away before its body was in |
| missing_api_key      | 401    | API keys are configured and none was sent (WWW-Authenticate: Bearer) |
| invalid_api_key      | 401    | the key sent is not one of them (proxy/auth.py) |
| body_timeout         | 408    | the body did not arrive within body_read_timeout_s (connection closed) |
| header_timeout       | 408    | headers not complete within header_read_timeout_s (proxy; closed) |
| invalid_request      | 422    | wrong or missing fields / types (pydantic errors, reformatted) |
| invalid_slo          | 422    | SLO latency not positive (or other SLO field invalid) |
| payload_too_large    | 413    | body over `http.max_body_bytes` |
| job_too_large        | 413    | a job with more items than `http.max_items_per_job` |
| unknown_model        | 404    | `model` is not a served family |
| unknown_task         | 422    | `task` is not a task of the family |
| missing_modality     | 422    | an input modality the family needs is absent |
| unknown_modality     | 422    | an input key is not a modality of the family |
| invalid_input        | 422    | decode rejected a value (bad base64, not an image, wrong shape) |
| unsupported_media_type | 415  | an image in a format other than PNG, JPEG, WebP (GIF, EPS, ...) |
| slo_unachievable     | 422    | SLO below the fastest variant's latency or answer |
| overloaded           | 429    | admission: the deadline cannot be met (with Retry-After) |
| not_found            | 404    | no such route |
| method_not_allowed   | 405    | wrong HTTP method |
| internal_error       | 500    | a server fault (the replica keeps running) |
| replica_unavailable  | 503    | replicas died / restarting and no answer could be had |
| controller_unavailable | 503  | status/metrics while the controller is down |
| not_ready            | 503    | /healthz while replicas are still starting |
| unavailable          | 503    | the model family has no live replica (Retry-After); /healthz when none has |
"""

from __future__ import annotations

import math
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError


class ErrorBody(BaseModel):
    type: str = Field(description="machine-readable kind, e.g. invalid_input, unknown_model")
    message: str
    field: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


STATUS_BY_TYPE = {
    "malformed_json": 400, "invalid_request": 422, "invalid_slo": 422,
    "payload_too_large": 413, "unknown_model": 404, "unknown_task": 422,
    "missing_modality": 422, "unknown_modality": 422, "invalid_input": 422,
    "slo_unachievable": 422, "job_too_large": 413, "overloaded": 429, "not_found": 404, "method_not_allowed": 405,
    "internal_error": 500, "replica_unavailable": 503, "controller_unavailable": 503,
    "not_ready": 503, "json_limit_exceeded": 400, "incomplete_body": 400,
    "missing_api_key": 401, "invalid_api_key": 401, "body_timeout": 408,
    "header_timeout": 408,
    "unsupported_media_type": 415,
    "unavailable": 503,
}


class ApiError(Exception):
    """Raised inside request handling; turned into an ErrorResponse by the route wrapper."""

    def __init__(self, type_: str, message: str, field: str | None = None,
                 status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.type = type_
        self.message = message
        self.field = field
        self.status = status or STATUS_BY_TYPE.get(type_, 500)
        self.retry_after_s = retry_after_s

    def response(self) -> JSONResponse:
        return error_response(self.status, self.type, self.message, self.field,
                              self.retry_after_s)


ERROR_TYPE_HEADER = "X-Adaptserve-Error"  # every error answer names its type here too


def retry_after_value(seconds: float) -> str:
    """A `Retry-After` value: whole seconds, at least 1 (RFC 9110 delay-seconds is digits
    only: "1.0" is no valid header, and urllib3's Retry rejects it)."""
    return str(max(1, math.ceil(seconds)))


def error_response(status: int, type_: str, message: str, field: str | None = None,
                   retry_after_s: float | None = None) -> JSONResponse:
    """The JSON answer; `retry_after_s` becomes a `Retry-After` header (`retry_after_value`)."""
    body = ErrorResponse(error=ErrorBody(type=type_, message=message, field=field))
    headers = {ERROR_TYPE_HEADER: type_}  # the front door reads it (proxy/front_door.py)
    if retry_after_s is not None:
        headers["Retry-After"] = retry_after_value(retry_after_s)
    return JSONResponse(status_code=status, content=body.model_dump(), headers=headers)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def from_validation(exc: ValidationError) -> ApiError:
    """Pydantic errors as one readable message: `field: problem; field: problem`."""
    errors = exc.errors(include_url=False)
    parts = [f"{_loc(tuple(e['loc']))}: {e['msg']}" for e in errors[:10]]
    first = _loc(tuple(errors[0]["loc"])) if errors else None
    type_ = "invalid_slo" if first and first.startswith("slo") else "invalid_request"
    return ApiError(type_, "invalid request: " + "; ".join(parts), first)
