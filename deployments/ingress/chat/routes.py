"""The ingress's OpenAI-compatible routes: POST /v1/chat/completions (service.py) and the
OpenAI list entries of GET /v1/models."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from fastapi import FastAPI, Request
from fastapi.responses import Response

from deployments.ingress.chat.answers import ModelEntry
from deployments.ingress.chat.errors import ChatError
from deployments.ingress.chat.service import ChatService
from deployments.ingress.clock import Arrival
from deployments.ingress.config import HttpConfig
from deployments.ingress.metrics import IngressMetrics
from deployments.ingress.proxy.edge import BodyRefused, read_body

log = logging.getLogger(__name__)


def model_entries(families: Iterable[str], chat: ChatService | None) -> list[ModelEntry]:
    """GET /v1/models in OpenAI's list shape too (`data`): the families and the chat model."""
    created = int(time.time())
    out = [ModelEntry(n, "classifier", created) for n in families]
    if chat is not None:
        m = chat.model
        out.append(ModelEntry(m.name, "chat", created, (
            ("context_len", m.context_len), ("max_images", chat.limits.max_images),
            ("path", m.pipeline.path))))
    return out


def add_chat_route(app: FastAPI, chat: ChatService, http: HttpConfig, metrics: IngressMetrics,
                   arrival_of: Callable[[Request], Arrival]) -> None:
    """POST /v1/chat/completions: the body read bounded and timed as classify's (proxy/edge.py),
    then the chat service; every answer in OpenAI's error shape or a completion."""

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        arrival = arrival_of(request)
        start = time.perf_counter()
        try:
            body = await read_body(request.receive, request.scope, http.max_body_bytes,
                                   http.body_read_timeout_s)
            resp = (ChatError("incomplete_body", "the client went away before its body was "
                              "in").response() if body is None
                    else await chat.answer(body, request.headers, arrival))
        except BodyRefused as exc:
            resp = ChatError(exc.type, exc.message).response()
        except Exception as exc:
            log.exception("unexpected error on chat")
            resp = ChatError("internal_error", f"{type(exc).__name__}: {exc}").response()
        metrics.observe("chat", resp.status_code, time.perf_counter() - start)
        return resp
