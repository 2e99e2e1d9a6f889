"""The chat route's OpenAPI entry (deployments/ingress/chat/openapi.py) is true of its answers:
every error code's body validates against the schema declared for its status, a completion
against the declared answer, an accepted request against the declared body."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from fastapi import FastAPI

from deployments.ingress.chat.answers import Usage, completion
from deployments.ingress.chat.errors import CODES, ChatError
from deployments.ingress.chat.openapi import PATH, declare_chat
from deployments.ingress.chat.parse import parse_chat
from deployments.ingress.chat.schemas import ChatLimits


def _doc() -> dict[str, Any]:
    app = FastAPI()

    @app.post(PATH)
    async def chat() -> None:  # the route's handler reads the raw body itself
        return None

    @app.get("/healthz")
    async def health() -> None:
        return None
    doc = app.openapi()
    declare_chat(doc)
    return doc


def _valid(doc: dict[str, Any], ref: str, value: Any) -> None:
    jsonschema.Draft202012Validator({"$ref": ref, "components": doc["components"]}).validate(value)


def test_every_chat_error_is_declared_with_its_body() -> None:
    doc = _doc()
    responses = doc["paths"][PATH]["post"]["responses"]
    for code, status in CODES.items():
        r = ChatError(code, f"what went wrong: {code}").response()
        assert r.status_code == status
        entry = responses[str(r.status_code)]
        assert code in entry["description"]
        _valid(doc, entry["content"]["application/json"]["schema"]["$ref"], json.loads(r.body))
    assert "Retry-After" in responses["429"]["headers"]


def test_completion_and_request_match_the_document() -> None:
    doc = _doc()
    post = doc["paths"][PATH]["post"]
    body = {"model": "vlm", "max_tokens": 4, "stream": False,
            "messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "text", "text": "which digit is this?"}]}]}
    _valid(doc, post["requestBody"]["content"]["application/json"]["schema"]["$ref"], body)
    req = parse_chat({"model": "vlm", "messages": [{"role": "user", "content": "hi"}]},
                     ChatLimits(), ["vlm"])
    out = completion(req, " five", "stop", Usage(12, 2), 0)
    _valid(doc, post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"], out)
    assert "text/event-stream" in post["responses"]["200"]["content"]
    assert "post" not in doc["paths"]["/healthz"]  # only the chat route is touched
