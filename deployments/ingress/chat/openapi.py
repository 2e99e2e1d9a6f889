"""The OpenAPI entry of POST /v1/chat/completions (ingress/openapi.py builds the rest): the request body
from the pydantic model that validates it (schemas.py), the `chat.completion` answer and
its SSE stream, and each error status with OpenAI's error body and its codes (errors.py).
Present only where the app serves a chat model (`generation:`)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from deployments.ingress.chat.errors import CODES
from deployments.ingress.chat.schemas import ChatCompletionRequest

PATH = "/v1/chat/completions"
REF = "#/components/schemas/{model}"
OPENAI_ERROR = {
    "type": "object", "required": ["error"], "title": "OpenAIError",
    "properties": {"error": {
        "type": "object", "required": ["message", "type", "code"],
        "properties": {"message": {"type": "string"}, "type": {"type": "string"},
                       "param": {"type": ["string", "null"]}, "code": {"type": "string"}}}}}
COMPLETION = {
    "type": "object", "title": "ChatCompletion",
    "required": ["id", "object", "created", "model", "choices", "usage"],
    "properties": {
        "id": {"type": "string"}, "object": {"const": "chat.completion"},
        "created": {"type": "integer"}, "model": {"type": "string"},
        "choices": {"type": "array", "items": {
            "type": "object", "required": ["index", "message", "finish_reason"],
            "properties": {"index": {"type": "integer"},
                           "message": {"type": "object", "properties": {
                               "role": {"const": "assistant"}, "content": {"type": "string"}}},
                           "finish_reason": {"type": ["string", "null"]}}}},
        "usage": {"type": "object", "description": "prompt_tokens count the image tokens",
                  "properties": {k: {"type": "integer"} for k in (
                      "prompt_tokens", "completion_tokens", "total_tokens")}},
        "adaptserve": {"type": "object", "description": "ttft_ms, deadline_met, path"}}}
RETRY_AFTER = {"Retry-After": {"description": "seconds", "schema": {"type": "string"}}}


def declare_chat(doc: dict[str, Any]) -> None:
    """Fills in the chat route's entry of `doc` (FastAPI's document), if the route exists."""
    post = doc.get("paths", {}).get(PATH, {}).get("post")
    if post is None:
        return
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    request = ChatCompletionRequest.model_json_schema(ref_template=REF, mode="validation")
    for name, sub in request.pop("$defs", {}).items():
        schemas.setdefault(name, sub)
    schemas["ChatCompletionRequest"] = request
    schemas["ChatCompletion"] = COMPLETION
    schemas["OpenAIError"] = OPENAI_ERROR
    post["requestBody"] = {"required": True, "content": {"application/json": {
        "schema": {"$ref": REF.format(model="ChatCompletionRequest")}}}}
    post["responses"] = {"200": {
        "description": "the completion; with `stream: true` server-sent events of "
                       "chat.completion.chunk objects ending in `data: [DONE]`",
        "content": {"application/json": {"schema": {"$ref": REF.format(model="ChatCompletion")}},
                    "text/event-stream": {"schema": {"type": "string"}}}}}
    by_status: dict[int, list[str]] = defaultdict(list)
    for code, status in CODES.items():
        by_status[status].append(code)
    for status, codes in sorted(by_status.items()):
        entry: dict[str, Any] = {
            "description": "OpenAI's error body; error.code: " + ", ".join(sorted(codes)),
            "content": {"application/json": {"schema": {"$ref": REF.format(
                model="OpenAIError")}}}}
        if status in (429, 503):
            entry["headers"] = RETRY_AFTER
        post["responses"][str(status)] = entry
