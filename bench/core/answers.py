"""What an answer was, read one way by every client: a refusal, an error and its JSON type, or
a result and its status.

The server answers errors as `{"error": {"type", "message"}}` (4xx/5xx); Serve's own proxy may
refuse in plain text. 429 and 503 are refusals (the client may retry after `Retry-After`).
"""

from __future__ import annotations

import json
from typing import Any

REFUSAL_STATUSES = (429, 503)


def json_body(body: bytes) -> Any:
    """The body as JSON, None when it is not JSON."""
    try:
        return json.loads(body)
    except ValueError:
        return None


def error_type(body: bytes) -> str | None:
    """The `error.type` of a JSON error body; None when the body has none (plain text too)."""
    data = json_body(body)
    err = data.get("error") if isinstance(data, dict) else None
    return str(err.get("type")) if isinstance(err, dict) and "type" in err else None


def outcome_of(status: int, body: bytes) -> str:
    """A 200's result status ("ok", "deadline_exceeded", "shed"), else the error type; "?"
    when the body says neither."""
    data = json_body(body)
    if not isinstance(data, dict):
        return "?"
    if status == 200:
        return str(data.get("status", "?"))
    return error_type(body) or "?"


def is_refusal(status: int) -> bool:
    return status in REFUSAL_STATUSES
