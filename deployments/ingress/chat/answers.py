"""Answers of the OpenAI-compatible routes, as OpenAI shapes them (and as the official `openai`
client's types parse them: tests/unit/test_chat_answers.py).

- `completion`: the `chat.completion` object of a non-streamed request.
- `ChunkStream`: the SSE bytes of a streamed one: `chat.completion.chunk` objects, the first
  with the role and the first token's text (nothing is sent before the first token, so a
  client's time to first chunk is its time to first token: `vllm bench serve` counts TTFT from
  the first chunk with choices), then content deltas, then one with `finish_reason`; a last
  chunk with `usage` and `choices: []` when `stream_options.include_usage`; then
  `data: [DONE]`. A failure after the 200 went out is an SSE error event (`data:
  {"error": {...}}`, as vLLM and OpenAI send it; the client raises `APIError`), then [DONE].
  Failures before the first token should be plain HTTP errors: hold the response until then.
- `usage.prompt_tokens` counts image tokens (what the model read).
- Our extension `adaptserve` (`ServedBy`: ttft_ms, deadline_met, path) on the completion and on
  the finishing chunk: OpenAI clients keep unknown fields (`model_extra`), none needs it.
- `models_page`: GET /v1/models entries in OpenAI's list shape, classifiers and chat models.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from deployments.ingress.chat.errors import ChatError
from deployments.ingress.chat.parse import ChatRequest

FinishReason = Literal["stop", "length"]
DONE = b"data: [DONE]\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
SSE_MEDIA_TYPE = "text/event-stream"
OWNER = "adaptserve"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int  # image tokens included
    completion_tokens: int

    def to_json(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens}


@dataclass(frozen=True)
class ServedBy:
    """How the answer was served (the `adaptserve` field)."""

    ttft_ms: float  # arrival to first token
    deadline_met: bool  # the TTFT SLO held
    path: Literal["disaggregated", "monolith"]

    def to_json(self) -> dict[str, Any]:
        return {"ttft_ms": round(self.ttft_ms, 3), "deadline_met": self.deadline_met,
                "path": self.path}


def answer_headers(req: ChatRequest) -> dict[str, str]:
    """`x-request-id` (the openai client shows it as the response's `_request_id`)."""
    return {"x-request-id": req.request_id}


def completion(req: ChatRequest, text: str, finish_reason: FinishReason, usage: Usage,
               created_s: int, served_by: ServedBy | None = None) -> dict[str, Any]:
    """The `chat.completion` object of a finished, non-streamed request."""
    out: dict[str, Any] = {
        "id": req.request_id, "object": "chat.completion", "created": created_s,
        "model": req.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "logprobs": None, "finish_reason": _reason(finish_reason)}],
        "usage": usage.to_json()}
    if served_by is not None:
        out[OWNER] = served_by.to_json()
    return out


def sse(obj: Mapping[str, Any]) -> bytes:
    """One SSE event carrying `obj` as JSON."""
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


@dataclass
class ChunkStream:
    """The SSE bytes of one streamed answer, built as the tokens come (one per request)."""

    req: ChatRequest
    created_s: int
    started: bool = field(default=False, init=False)
    ended: bool = field(default=False, init=False)

    def delta(self, text: str) -> bytes:
        """New text; the first call carries the role too. Later empty deltas send nothing."""
        self._open()
        if self.started and not text:
            return b""
        delta = {"content": text} if self.started else {"role": "assistant", "content": text}
        self.started = True
        return sse(self._chunk([{"index": 0, "delta": delta, "logprobs": None,
                                 "finish_reason": None}]))

    def finish(self, finish_reason: FinishReason, usage: Usage,
               served_by: ServedBy | None = None) -> bytes:
        """The finishing chunk, the usage chunk when asked for, and [DONE]."""
        self._open()
        delta = {} if self.started else {"role": "assistant", "content": ""}
        last = self._chunk([{"index": 0, "delta": delta, "logprobs": None,
                             "finish_reason": _reason(finish_reason)}])
        if served_by is not None:
            last[OWNER] = served_by.to_json()
        out = sse(last)
        if self.req.include_usage:
            out += sse({**self._chunk([]), "usage": usage.to_json()})
        self.started = self.ended = True
        return out + DONE

    def fail(self, error: ChatError) -> bytes:
        """A failure after the stream began: the error event, then [DONE]."""
        self._open()
        self.ended = True
        return error.sse() + DONE

    def _chunk(self, choices: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.req.request_id, "object": "chat.completion.chunk",
                               "created": self.created_s, "model": self.req.model,
                               "choices": choices}
        if self.req.include_usage:
            out["usage"] = None  # as OpenAI sends it: every chunk but the last has usage null
        return out

    def _open(self) -> None:
        if self.ended:
            raise RuntimeError(f"stream {self.req.request_id} already ended")


def _reason(finish_reason: str) -> str:
    if finish_reason not in ("stop", "length"):  # an engine's "abort" is an error, not a finish
        raise ValueError(f"finish_reason {finish_reason!r}; valid: stop, length")
    return finish_reason


@dataclass(frozen=True)
class ModelEntry:
    """One model of GET /v1/models: a classifier family (POST /v1/classify) or a chat model
    (POST /v1/chat/completions); `details` (e.g. context_len, max_images) go under
    `adaptserve`."""

    id: str
    kind: Literal["classifier", "chat"]
    created_s: int
    details: tuple[tuple[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        route = "/v1/chat/completions" if self.kind == "chat" else "/v1/classify"
        return {"id": self.id, "object": "model", "created": self.created_s, "owned_by": OWNER,
                OWNER: {"kind": self.kind, "route": route, **dict(self.details)}}


def models_page(entries: Iterable[ModelEntry]) -> dict[str, Any]:
    """OpenAI's list shape, `{"object": "list", "data": [...]}`: merged into the current
    GET /v1/models answer beside its `models` key (which stays as it is)."""
    return {"object": "list", "data": [e.to_json() for e in entries]}
