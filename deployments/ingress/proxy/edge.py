"""The HTTP edge: bounded, timed body reads and API-key checks, as ASGI pieces shared by the
Serve proxy's front door (front_door.py) and the ingress app (ingress/deployment.py).

Bodies are read while they stream, Content-Length and chunked alike: a body over the limit is
refused (413) as soon as its bytes pass the limit, without reading the rest; a body that has
not fully arrived `body_read_timeout_s` after the headers is refused (408), so slow or partial
clients (slowloris) cannot hold a request slot. Both answers close the connection. Headers that
are not complete within `header_read_timeout_s` get a 408 from below the ASGI app, in uvicorn's
protocol (header_timeout.py): middleware only runs once the headers are in.

The proxy starts before, and apart from, any application, so it cannot read the app's config:
its edge settings come from the environment of the Ray processes, `ADAPTSERVE_EDGE` (a JSON
object of `EdgeConfig` fields; unknown keys are refused), and its API keys from
`ADAPTSERVE_API_KEYS` (or the file `auth.api_keys_file` names). The ingress replicas read the
same variables (they inherit the cluster's environment), so one setting serves both.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from pydantic import Field

from deployments.config import StrictConfig
from deployments.ingress.proxy.auth import ApiKeys, AuthConfig, check

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Message, Receive, Send], Awaitable[None]]

EDGE_ENV = "ADAPTSERVE_EDGE"


class EdgeConfig(StrictConfig):
    """What the Serve proxy enforces before a request reaches the ingress."""

    max_body_bytes: int = Field(
        default=8 * 1024 * 1024, gt=0,
        description="largest body the proxy reads (keep it = http.max_body_bytes); beyond: 413")
    body_read_timeout_s: float = Field(
        default=20.0, gt=0,
        description="the whole body must arrive within this long after the headers; else 408")
    header_read_timeout_s: float = Field(
        default=10.0, gt=0,
        description="a request's headers must be complete within this long after the "
                    "connection opens (kept alive: after the first byte that follows the "
                    "previous answer); else 408 header_timeout and the connection is closed "
                    "(uvicorn has no such timer: header_timeout.py)")
    max_buffered_bytes: int = Field(
        default=256 * 1024 * 1024, gt=0,
        description="bytes of bodies still arriving that one proxy holds at once; a body that "
                    "would go over gets 503 overloaded (Retry-After: 1)")
    auth: AuthConfig = Field(default_factory=AuthConfig, description="API keys")


def edge_from_env(environ: Mapping[str, str]) -> EdgeConfig:
    """`EdgeConfig` from `ADAPTSERVE_EDGE` (defaults when unset); a bad value raises, naming
    it: the proxy would rather not start than run an edge its operator did not ask for."""
    raw = environ.get(EDGE_ENV, "").strip()
    return EdgeConfig.model_validate_json(raw) if raw else EdgeConfig()


class BodyRefused(Exception):
    def __init__(self, status: int, type_: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type_
        self.message = message


class ByteBudget:
    """Bytes of bodies being read at once (one per proxy)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used -= n


def header(scope: Message, name: bytes) -> str | None:
    """A request header's value (latin-1, as ASGI gives bytes), or None."""
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def declared_length(scope: Message) -> int | None:
    value = header(scope, b"content-length")
    return int(value) if value and value.strip().isdigit() else None


async def read_body(receive: Receive, scope: Message, max_bytes: int, timeout_s: float,
                    budget: ByteBudget | None = None) -> bytes | None:
    """The whole body, read while it streams (None: the client went away first). Raises
    BodyRefused: 413 once a declared or received size passes `max_bytes` (nothing more is
    read), 408 when it has not all arrived within `timeout_s`, 503 when `budget` is spent."""
    declared = declared_length(scope)
    if declared is not None and declared > max_bytes:
        raise BodyRefused(413, "payload_too_large",
                          f"request body is {declared} bytes; the limit is {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None
                chunk = message.get("body", b"")
                if len(chunk) + size > max_bytes:
                    raise BodyRefused(413, "payload_too_large",
                                      f"request body is over the limit of {max_bytes} bytes "
                                      "(refused while it streamed)")
                if budget is not None and not budget.take(len(chunk)):
                    raise BodyRefused(503, "overloaded", "too many request bodies arriving at "
                                      "once; retry after 1 s")
                size += len(chunk)
                chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)
    except TimeoutError:
        raise BodyRefused(408, "body_timeout",
                          f"request body did not arrive within {timeout_s:g} s ({size} bytes "
                          "came)") from None
    finally:
        if budget is not None:
            budget.give(size)


def replay(body: bytes, receive: Receive) -> Receive:
    """`receive` that gives the body read first (one message), then the client's own."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def again() -> Message:
        return pending.pop() if pending else await receive()
    return again


async def send_error(send: Send, status: int, type_: str, message: str,
                     headers: tuple[tuple[str, str], ...] = (), close: bool = False) -> None:
    """One JSON ErrorResponse (deployments/ingress/errors.py's shape) as ASGI messages."""
    body = json.dumps({"error": {"type": type_, "message": message, "field": None}}).encode()
    raw = [(b"content-type", b"application/json"),
           (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
    if close:
        raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def send_refused(send: Send, exc: BodyRefused) -> None:
    retry = (("Retry-After", "1"),) if exc.status == 503 else ()
    await send_error(send, exc.status, exc.type, exc.message, retry, close=exc.status != 503)


class AuthGate:
    """ASGI middleware: refuses (401) what `auth.check` refuses; the ingress app's own line of
    defence when a request reaches it without the proxy's front door."""

    def __init__(self, app: ASGIApp, keys: ApiKeys) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = check(self.keys, scope.get("path", ""), header(scope, b"authorization"))
            if refusal is not None:
                await send_error(send, refusal.status, refusal.type, refusal.message,
                                 refusal.headers)
                return
        await self.app(scope, receive, send)
