"""Admission in the Serve proxy: a per-family concurrency limit (policies/admission.py) applied
before a request is forwarded, so a refusal costs the proxy one small JSON answer and nothing
downstream (the ingress's own admission, deployments/ingress/admission.py, stays as the second
line: it knows each family's queue).

Serve loads it in every HTTP proxy through its proxy callback:
`RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=deployments.ingress.front_door:proxy_middlewares`
(deployments/config.py CLUSTER_ENV; set wherever Ray starts). Only `POST /v1/classify` is
limited; every HTTP answer passes through `json_errors`, which turns Serve's own plain-text
refusals (its backpressure 503) into this API's JSON error body. The body is read here (it has to be read
once anyway), its `model` and `slo.latency_ms` peeked at, and handed on unchanged. A body that
does not parse passes through, so the ingress answers it with its usual 4xx.

Latency is measured from the request's arrival as the client's clock has it (`X-Request-Start`,
deployments/ingress/clock.py) to the answer's start, which is what the limiter learns from.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import fields
from typing import Any

from starlette.middleware import Middleware

from deployments.ingress.clock import HEADER, arrival_from
from policies.admission import ConcurrencyLimiter, LimiterSettings

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Message, Receive, Send], Awaitable[None]]

LIMITED_PATH = "/v1/classify"
MAX_KEYS = 64  # families tracked; other names share one limiter (bodies choose the names)
OTHER = "_other"
MAX_PEEK_BYTES = 64 * 1024 * 1024  # larger bodies pass through unread (the ingress refuses)
RETRY_AFTER_S = 1
REFUSAL_MARK = "concurrency limit"  # in every front-door refusal's message (benches tell them apart)


SETTINGS_ENV = "ADAPTSERVE_FRONT_DOOR"  # JSON object of LimiterSettings fields


def settings_from_env(environ: Mapping[str, str]) -> LimiterSettings:
    """The limiter's settings: the defaults, overridden by the JSON object in
    `ADAPTSERVE_FRONT_DOOR` (e.g. '{"late_fraction": 0.6}'). Unknown keys and non-numbers
    are refused, naming the valid keys: the proxy would rather not start than run a limit
    its operator did not ask for."""
    raw = environ.get(SETTINGS_ENV, "").strip()
    if not raw:
        return LimiterSettings()
    valid = {f.name: f.type for f in fields(LimiterSettings)}
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError(f"{SETTINGS_ENV} must be a JSON object of {sorted(valid)}")
    unknown = sorted(set(data) - set(valid))
    if unknown:
        raise ValueError(f"{SETTINGS_ENV}: unknown keys {unknown}; valid: {sorted(valid)}")
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{SETTINGS_ENV}: {key} must be a number, got {value!r}")
    return LimiterSettings(**data)


def proxy_middlewares() -> list[Middleware]:
    """Serve's HTTP proxy callback (the limiter's settings from `ADAPTSERVE_FRONT_DOOR`)."""
    return [Middleware(FrontDoor, settings=settings_from_env(os.environ))]


def peek(body: bytes) -> tuple[str, float | None] | None:
    """(model, SLO seconds) of a classify body, or None when it is not one."""
    try:
        data = json.loads(body)
        model = data["model"]
        slo_ms = data.get("slo", {}).get("latency_ms")
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if not isinstance(model, str):
        return None
    ok = isinstance(slo_ms, (int, float)) and not isinstance(slo_ms, bool) and slo_ms > 0
    return model, (slo_ms / 1000.0 if ok else None)


def refusal(model: str, limit: int) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps({"error": {
        "type": "overloaded", "field": None,
        "message": f"{model} is at its {REFUSAL_MARK} ({limit} requests in flight, learned "
                   f"from the latency clients see); retry after {RETRY_AFTER_S} s"}}).encode()
    return 429, [(b"content-type", b"application/json"), (b"retry-after", b"1"),
                 (b"content-length", str(len(body)).encode())], body


async def read_body(receive: Receive) -> tuple[bytes | None, list[Message]]:
    """The whole body (None: larger than MAX_PEEK_BYTES, left partly unread) and the messages
    read, to be replayed downstream."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return b"".join(chunks), messages
        chunk = message.get("body", b"")
        size += len(chunk)
        chunks.append(chunk)
        if size > MAX_PEEK_BYTES:
            return None, messages
        if not message.get("more_body", False):
            return b"".join(chunks), messages


def replay(messages: list[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def again() -> Message:
        return pending.pop(0) if pending else await receive()
    return again


def json_errors(send: Send) -> Send:
    """`send` with Serve's own plain-text refusals (its backpressure 503/429, its 500s) turned
    into this API's JSON error body, so every answer a client gets is JSON; any other
    response passes unchanged."""
    held: list[Message] = []
    chunks: list[bytes] = []

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers") or [])
            plain = headers.get(b"content-type", b"").startswith(b"text/plain")
            if message["status"] >= 400 and plain:
                held.append(message)
                return
        elif held:
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            await _send_json(send, held[0], b"".join(chunks))
            return
        await send(message)
    return wrapped


async def _send_json(send: Send, start: Message, text: bytes) -> None:
    status = start["status"]
    kind = {503: "overloaded", 429: "overloaded", 408: "timeout"}.get(status, "proxy_error")
    body = json.dumps({"error": {"type": kind, "message": text.decode("utf-8", "replace"),
                                 "field": None}}).encode()
    headers = [(k, v) for k, v in start.get("headers") or []
               if k.lower() not in (b"content-type", b"content-length")]
    headers += [(b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class FrontDoor:
    def __init__(self, app: ASGIApp, settings: LimiterSettings | None = None) -> None:
        self.app = app
        self.settings = settings or LimiterSettings()
        self.limiters: dict[str, ConcurrencyLimiter] = {}

    def limiter(self, model: str) -> ConcurrencyLimiter:
        key = model if model in self.limiters or len(self.limiters) < MAX_KEYS else OTHER
        if key not in self.limiters:
            self.limiters[key] = ConcurrencyLimiter(self.settings)
        return self.limiters[key]

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = json_errors(send)
        if scope.get("method") != "POST" or scope.get("path") != LIMITED_PATH:
            await self.app(scope, receive, send)
            return
        entry_s = time.time()
        body, messages = await read_body(receive)
        found = None if body is None else peek(body)  # too large: the ingress answers 413
        if found is None:
            await self.app(scope, replay(messages, receive), send)
            return
        await self._admit(scope, replay(messages, receive), send, found, entry_s)

    async def _admit(self, scope: Message, receive: Receive, send: Send,
                     found: tuple[str, float | None], entry_s: float) -> None:
        model, slo_s = found
        limiter = self.limiter(model)
        if not limiter.try_acquire():
            status, headers, body = refusal(model, int(limiter.limit))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        headers = dict(scope.get("headers") or [])
        raw = headers.get(HEADER.lower().encode())
        arrival = arrival_from(raw.decode("latin-1") if raw else None, entry_s, 1.0, 60.0)
        status = {"code": 500}

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)
        try:
            await self.app(scope, receive, watch)
        finally:
            # a 429 from behind (the ingress's deadline admission) means the stack was too slow
            # for what this limit let in: it counts as late, as 5xx answers do
            limiter.release(time.time() - arrival.time_s, slo_s,
                            failed=status["code"] >= 500 or status["code"] == 429)
