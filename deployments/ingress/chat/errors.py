"""Errors of the OpenAI-compatible routes (`/v1/chat/completions`, `/v1/models` for chat
clients), in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.

OpenAI clients read `error.message` (the official `openai` client puts it in the exception's
text and keeps `type`, `param`, `code` as attributes) and choose the exception class by the HTTP
status: 400 BadRequestError, 401 AuthenticationError, 404 NotFoundError, 422
UnprocessableEntityError, 429 RateLimitError, >= 500 InternalServerError, any other 4xx
APIStatusError. The classify API keeps its own shape (ingress/errors.py): its clients switch on
`error.type`; here `code` is the machine-readable kind and `type` the broad class:

| type                  | status             | codes |
|-----------------------|--------------------|-------|
| invalid_request_error | 400, 404, 413, 415 | see CODES |
| authentication_error  | 401                | missing_api_key, invalid_api_key |
| rate_limit_error      | 429                | overloaded (Retry-After) |
| server_error          | 500, 503           | internal_error, unavailable, replica_unavailable |
| timeout_error         | 504                | deadline_exceeded (x-should-retry: false) |

Every validation problem is a 400 here, where the classify API answers 422: OpenAI's API does,
and clients catch `BadRequestError`. The exception is a recognised image format we do not take
(GIF, BMP, ...): 415, as the classify API answers it.

The `openai` client retries 408, 409, 429 and >= 500 (twice by default, honouring
Retry-After); `x-should-retry: false` stops it for `deadline_exceeded`: a retry of a request
that missed its time-to-first-token SLO under load adds load when there is least room.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse
from pydantic import ValidationError

from deployments.ingress.errors import ERROR_TYPE_HEADER, ApiError, retry_after_value

CODES: dict[str, int] = {
    # the body
    "malformed_json": 400, "json_limit_exceeded": 400, "incomplete_body": 400,
    "invalid_request": 400, "unknown_parameter": 400, "unsupported_value": 400,
    "payload_too_large": 413, "body_timeout": 408,
    # the model and the messages
    "model_not_found": 404, "empty_messages": 400, "too_many_messages": 400,
    "unsupported_role": 400, "unsupported_content_part": 400, "empty_content": 400,
    "text_too_long": 400, "reserved_token": 400, "context_length_exceeded": 400,
    "max_tokens_out_of_range": 400,
    # images
    "too_many_images": 400, "remote_url_not_supported": 400, "invalid_image_url": 400,
    "invalid_base64": 400, "invalid_image": 400, "image_too_large": 400,
    "unsupported_media_type": 415,
    # the time-to-first-token SLO
    "invalid_slo": 400, "slo_unachievable": 400,
    # the server
    "missing_api_key": 401, "invalid_api_key": 401, "overloaded": 429,
    "internal_error": 500, "unavailable": 503, "replica_unavailable": 503,
    "deadline_exceeded": 504,
}
TYPES = {401: "authentication_error", 429: "rate_limit_error", 504: "timeout_error"}
# the classify API's error types (ingress/errors.py) whose meaning has another code here
FROM_API_TYPES = {"unknown_model": "model_not_found", "invalid_input": "invalid_image",
                  "invalid_slo": "invalid_slo", "not_ready": "unavailable",
                  "controller_unavailable": "unavailable"}


def error_type(status: int) -> str:
    """OpenAI's broad class of an error status."""
    return TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


class ChatError(Exception):
    """Raised while a chat request is parsed or served; one OpenAI-shaped answer."""

    def __init__(self, code: str, message: str, param: str | None = None,
                 status: int | None = None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param
        self.status = status or CODES.get(code, 500)
        self.retry_after_s = retry_after_s

    @property
    def type(self) -> str:
        return error_type(self.status)

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}

    def headers(self) -> dict[str, str]:
        """`X-Adaptserve-Error` (the front door's metrics read it), `Retry-After` when known,
        `x-should-retry: false` on deadline_exceeded (the openai client obeys it)."""
        out = {ERROR_TYPE_HEADER: self.code}
        if self.retry_after_s is not None:
            out["Retry-After"] = retry_after_value(self.retry_after_s)
        if self.code == "deadline_exceeded":
            out["x-should-retry"] = "false"
        return out

    def sse(self) -> bytes:
        """The error as one SSE event, for a failure after a stream's 200 went out: the
        `openai` client raises `APIError` with this message when it reads it."""
        return b"data: " + json.dumps(self.body()).encode() + b"\n\n"

    def response(self) -> JSONResponse:
        """The HTTP answer (status, OpenAI-shaped body, headers)."""
        return JSONResponse(status_code=self.status, content=self.body(),
                            headers=self.headers())


def from_api_error(exc: ApiError) -> ChatError:
    """The classify API's ApiError (strict JSON, edge, admission, liveness, dispatch: shared
    with the chat route) in this shape; a 422 there is a 400 here."""
    code = FROM_API_TYPES.get(exc.type, exc.type)
    status = CODES.get(code, 400 if exc.status == 422 else exc.status)
    return ChatError(code, exc.message, exc.field, status, exc.retry_after_s)


def loc_text(loc: tuple[Any, ...]) -> str:
    """`messages[0].content` from pydantic's ('messages', 0, 'content')."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def from_validation(exc: ValidationError, accepted: tuple[str, ...]) -> ChatError:
    """The first pydantic problem as a ChatError naming the field; an unknown top-level field
    is `unknown_parameter`, naming the `accepted` ones."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = loc_text(tuple(first["loc"]))
    if first["type"] == "extra_forbidden":
        if len(first["loc"]) == 1:
            return ChatError("unknown_parameter", f"unrecognized request argument: {where!r}; "
                             f"this server takes {', '.join(accepted)}", where)
        return ChatError("unknown_parameter", f"{where}: unrecognized field", where)
    code = "invalid_slo" if where.startswith("slo") else "invalid_request"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return ChatError(code, f"{where}: {first['msg']}{more}", where)
