"""Chat API request bodies for the request layer's tests (tests/unit/test_chat_parse*.py): a
body with content parts, an image part, and `refused`, which parses and returns the ChatError
after checking its body names the problem."""

from __future__ import annotations

from typing import Any

import pytest

from deployments.ingress.chat.errors import ChatError
from deployments.ingress.chat.parse import parse_chat
from deployments.ingress.chat.schemas import ChatLimits
from tests.helpers.images import data_url, image_bytes

MODELS = ("vlm",)
LIMITS = ChatLimits()
TEXT = {"type": "text", "text": "read the digits"}
PNG = data_url(image_bytes())


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def body(*parts: dict[str, Any], **fields: Any) -> dict[str, Any]:
    content = list(parts) or "what is two plus three?"
    return {"model": "vlm", "messages": [{"role": "user", "content": content}], **fields}


def refused(raw: Any, limits: ChatLimits = LIMITS, **kw: Any) -> ChatError:
    with pytest.raises(ChatError) as info:
        parse_chat(raw, limits, MODELS, **kw)
    err = info.value
    assert err.body()["error"]["message"] == err.message and err.body()["error"]["code"]
    return err
