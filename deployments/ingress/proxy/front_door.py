"""Admission in the Serve proxy: a per-family concurrency limit (policies/admission.py) applied
before a request is forwarded, so a refusal costs the proxy one small JSON answer and nothing
downstream (the ingress's own admission, deployments/ingress/classify/admission.py, stays as the second
line: it knows each family's queue).

Serve loads it in every HTTP proxy through its proxy callback:
`RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=deployments.ingress.proxy.front_door:proxy_middlewares`
(deployments/config.py CLUSTER_ENV; set wherever Ray starts). Only `POST /v1/classify` is
limited; every HTTP answer passes through `json_errors`, which turns Serve's own plain-text
refusals (its backpressure 503) into this API's JSON error body.

Before anything is forwarded, every request is checked here (deployments/ingress/proxy/edge.py):
its API key (401; auth.py), then its body, read whole while it streams, bounded and timed
(413/408; a slow or partial client holds no ingress slot, because Serve forwards a request
to the ingress as soon as this middleware passes it on, and the ingress would then wait for
the body). A classify body's `model` and `slo.latency_ms` are peeked at and the body is handed
on unchanged. A body that does not parse passes through, so the ingress answers it with its
usual 4xx.

Latency is measured from the request's arrival as the client's clock has it (`X-Request-Start`,
deployments/ingress/clock.py) to the answer's start, which is what the limiter learns from.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Mapping
from dataclasses import fields

from starlette.middleware import Middleware

from deployments.ingress.clock import HEADER, arrival_from
from deployments.ingress.errors import ERROR_TYPE_HEADER
from deployments.ingress.proxy.auth import ApiKeys, check, load_keys
from deployments.ingress.proxy.edge import (
    ASGIApp,
    BodyRefused,
    ByteBudget,
    EdgeConfig,
    Message,
    Receive,
    Send,
    edge_from_env,
    header,
    read_body,
    replay,
    send_error,
    send_refused,
)
from deployments.ingress.proxy.header_timeout import install_header_timeout
from policies.admission import ConcurrencyLimiter, LimiterSettings

log = logging.getLogger(__name__)
LIMITED_PATH = "/v1/classify"
MAX_KEYS = 64  # families tracked; other names share one limiter (bodies choose the names)
OTHER = "_other"
RETRY_AFTER_S = 1
REFUSAL_MARK = "concurrency limit"  # in every front-door refusal's message (benches tell them apart)


SETTINGS_ENV = "ADAPTSERVE_FRONT_DOOR"  # JSON object of LimiterSettings fields
# on each classify answer, from the ingress: "1" when the family's policy degrades under load
# (the limiter then judges lateness by `degrading_late_fraction`); taken off before the client
DEGRADES_HEADER = "X-Adaptserve-Degrades"
_DEGRADES = DEGRADES_HEADER.lower().encode()


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
    """Serve's HTTP proxy callback (the limiter's settings from `ADAPTSERVE_FRONT_DOOR`, the
    edge's from `ADAPTSERVE_EDGE`, API keys as `auth` there says: edge.py). Serve calls it
    before it starts uvicorn, so it also installs the header read timeout there."""
    edge = edge_from_env(os.environ)
    keys = load_keys(edge.auth, os.environ)
    install_header_timeout(edge.header_read_timeout_s)  # below ASGI: see header_timeout.py
    log.log(logging.WARNING if keys.open else logging.INFO, "front door: %s", keys.describe())
    return [Middleware(FrontDoor, settings=settings_from_env(os.environ), edge=edge, keys=keys)]


def peek(body: bytes) -> tuple[str, float | None] | None:
    """(model, SLO seconds) of a classify body, or None when it is not one."""
    try:
        data = json.loads(body)
        model = data["model"]
        slo_ms = data.get("slo", {}).get("latency_ms")
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None
    if not isinstance(model, str):
        return None
    ok = (isinstance(slo_ms, (int, float)) and not isinstance(slo_ms, bool)
          and math.isfinite(slo_ms) and slo_ms > 0)
    return model, (slo_ms / 1000.0 if ok else None)


def refusal(model: str, limit: int) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps({"error": {
        "type": "overloaded", "field": None,
        "message": f"{model} is at its {REFUSAL_MARK} ({limit} requests in flight, learned "
                   f"from the latency clients see); retry after {RETRY_AFTER_S} s"}}).encode()
    return 429, [(b"content-type", b"application/json"), (b"retry-after", b"1"),
                 (b"content-length", str(len(body)).encode())], body


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


def _error_type(start: Message) -> bytes | None:
    """The ingress's error type of an answer (its `X-Adaptserve-Error` header), if any."""
    for name, value in start.get("headers") or ():
        if name.lower() == ERROR_TYPE_HEADER.lower().encode():
            return bytes(value)
    return None


def _take_degrades(start: Message, out: list[bool]) -> Message:
    """`start` without the ingress's DEGRADES_HEADER; its value, if there, appended to `out`."""
    headers = start.get("headers") or []
    kept = [(k, v) for k, v in headers if k.lower() != _DEGRADES]
    if len(kept) == len(headers):
        return start
    out.extend(bytes(v) == b"1" for k, v in headers if k.lower() == _DEGRADES)
    return {**start, "headers": kept}


class FrontDoor:
    def __init__(self, app: ASGIApp, settings: LimiterSettings | None = None,
                 edge: EdgeConfig | None = None, keys: ApiKeys | None = None) -> None:
        """`keys`: the API keys (None or none: open)."""
        self.app = app
        self.settings = settings or LimiterSettings()
        self.edge = edge or EdgeConfig()
        self.keys = keys or ApiKeys()
        self.budget = ByteBudget(self.edge.max_buffered_bytes)
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
        denied = check(self.keys, scope.get("path", ""), header(scope, b"authorization"))
        if denied is not None:  # before the body: a refused caller costs nothing more
            await send_error(send, denied.status, denied.type, denied.message, denied.headers)
            return
        entry_s = time.time()
        try:
            body = await read_body(receive, scope, self.edge.max_body_bytes,
                                   self.edge.body_read_timeout_s, self.budget)
        except BodyRefused as exc:
            await send_refused(send, exc)
            return
        if body is None:  # the client went away before its body was in
            return
        receive = replay(body, receive)
        limited = scope.get("method") == "POST" and scope.get("path") == LIMITED_PATH
        found = peek(body) if limited else None
        if found is None:
            await self.app(scope, receive, send)
            return
        await self._admit(scope, receive, send, found, entry_s)

    async def _admit(self, scope: Message, receive: Receive, send: Send,
                     found: tuple[str, float | None], entry_s: float) -> None:
        model, slo_s = found
        limiter = self.limiter(model)
        if not limiter.try_acquire():
            status, headers, body = refusal(model, int(limiter.limit))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        alone = limiter.inflight == 1  # nothing else of the family in flight: unloaded
        headers = dict(scope.get("headers") or [])
        raw = headers.get(HEADER.lower().encode())
        arrival = arrival_from(raw.decode("latin-1") if raw else None, entry_s, 1.0, 60.0)
        status = {"code": 500, "unavailable": False}
        degrades: list[bool] = []

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                status["unavailable"] = (_error_type(message) == b"unavailable")
                message = _take_degrades(message, degrades)
            await send(message)
        try:
            await self.app(scope, receive, watch)
        finally:
            # a 429 from behind (the ingress's deadline admission) means the stack was too slow
            # for what this limit let in: it counts as late, as 5xx answers do; a family with
            # no live replica (503 unavailable, ingress health) says nothing about the limit
            failed = (status["code"] >= 500 or status["code"] == 429) and not status["unavailable"]
            limiter.release(time.time() - arrival.time_s, slo_s, failed=failed,
                            unloaded=alone and 200 <= status["code"] < 300,
                            degrades=degrades[0] if degrades else None)
