"""A header read timeout for the Serve proxy's HTTP server (`ADAPTSERVE_EDGE`
`header_read_timeout_s`, edge.py): a connection whose request headers are not complete in time
is answered 408 `header_timeout` (`Connection: close`) and closed.

Why a wrapper around uvicorn's protocol class: Ray Serve's proxy serves HTTP with uvicorn
(`ray.serve._private.http_util.start_asgi_http_server`: `uvicorn.Config(...)` with no `http=`,
so `"auto"`: `HttpToolsProtocol` when httptools is installed, else `H11Protocol`). Uvicorn has no
timer before a request's headers are complete (its `--timeout-request-start` of
encode/uvicorn#157 was never built): `timeout_keep_alive` (Serve's `keep_alive_timeout_s`) is
armed only after a response and cancelled by any byte received, and ASGI middleware (the front
door, front_door.py) runs only once the headers are in. So a client that sends headers slowly,
or opens a connection and sends nothing, holds a file descriptor in the proxy forever.

`install_header_timeout` (called by the proxy callback, front_door.py `proxy_middlewares`, which
Serve runs in each proxy before it starts uvicorn) replaces `uvicorn.protocols.http.auto.
AutoHTTPProtocol`, the class `Config(http="auto").load()` imports, with a subclass of it. The
clock starts when the connection opens and, on a kept-alive connection, at the first byte after
the previous response (before that byte the idle connection is the keep-alive timer's, as
before). It stops when a request's headers are complete (uvicorn then creates a new request
cycle, `protocol.cycle`) or the connection is upgraded (WebSocket), so a connection that is
mid-request or streaming an answer is never touched. Cost: one timer handle per connection.

Checked against uvicorn 0.54.0 (httptools 0.9.0, h11 0.16.0) under Ray Serve 2.60.0. It relies
on these uvicorn internals, and when any is missing it logs a warning and installs nothing:
`uvicorn.protocols.http.auto.AutoHTTPProtocol`; the protocol's `connection_made`,
`data_received`, `on_response_complete` and `connection_lost`; its `loop`, `transport` and
`cycle` attributes; the cycle's `response_complete`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

log = logging.getLogger(__name__)

HOOKS = ("connection_made", "data_received", "on_response_complete", "connection_lost")
ATTRIBUTES = ("loop", "transport", "cycle")  # set in the protocol's __init__
BASE_MARK = "header_timeout_base"  # on an installed class: the uvicorn class it wraps


def timeout_answer(timeout_s: float, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """The raw 408 (this API's JSON error body, `Connection: close`)."""
    body = json.dumps({"error": {
        "type": "header_timeout", "field": None,
        "message": f"request headers did not arrive within {timeout_s:g} s "
                   "(header_read_timeout_s); connection closed"}}).encode()
    head = [b"HTTP/1.1 408 Request Timeout"]
    head += [name + b": " + value for name, value in default_headers]
    head += [b"content-type: application/json", b"content-length: %d" % len(body),
             b"connection: close"]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


class HeaderDeadline(asyncio.Protocol):
    """Mixed in before a uvicorn HTTP protocol class (`with_header_timeout`). Per connection:
    `_header_timer` (armed while headers are awaited) and `_awaiting_headers`; the class-level
    defaults below mean uvicorn's `__init__` is left alone."""

    header_read_timeout_s: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None
    _awaiting_headers: bool = False
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._awaiting_headers = True
        self._arm_header_timer()

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        super().data_received(data)
        if self._headers_done(before):
            return
        if self._awaiting_headers and self._header_timer is None:
            self._arm_header_timer()  # the first byte after a response on a kept-alive connection

    def on_response_complete(self) -> None:
        before = self.cycle
        super().on_response_complete()  # type: ignore[misc]
        if self._headers_done(before):  # h11 parses buffered pipelined requests here
            return
        cycle = self.cycle
        if not self.transport.is_closing() and (cycle is None or cycle.response_complete):
            self._awaiting_headers = True  # the next request's first byte starts the clock

    def connection_lost(self, exc: Exception | None) -> None:
        self._awaiting_headers = False
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _headers_done(self, before: Any) -> bool:
        """A new request cycle (its headers are complete) or an upgrade since `before`: stop."""
        if self.cycle is before and self.transport.get_protocol() is self:
            return False
        self._awaiting_headers = False
        self._cancel_header_timer()
        return True

    def _arm_header_timer(self) -> None:
        self._header_timer = self.loop.call_later(self.header_read_timeout_s,
                                                  self._header_timeout)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _header_timeout(self) -> None:
        """408 and close when nothing else is being written (else just close); a client that
        does not take the 408 at once is cut off (abort), so it cannot hold the socket."""
        self._header_timer = None
        transport = self.transport
        if not self._awaiting_headers or transport.is_closing():
            return
        self._awaiting_headers = False
        log.debug("header_timeout: closing a connection after %g s", self.header_read_timeout_s)
        if transport.get_protocol() is not self or transport.get_write_buffer_size() > 0:
            transport.abort()
            return
        state = getattr(self, "server_state", None)
        transport.write(timeout_answer(self.header_read_timeout_s,
                                       list(getattr(state, "default_headers", None) or [])))
        if transport.get_write_buffer_size() > 0:
            transport.abort()
        else:
            transport.close()


def missing_internals(base: type) -> list[str]:
    """The uvicorn internals `HeaderDeadline` relies on that `base` lacks (empty: usable)."""
    missing = [name for name in HOOKS if not callable(getattr(base, name, None))]
    init = getattr(base, "__init__", None)
    names = getattr(getattr(init, "__code__", None), "co_names", ())
    missing += [f"self.{name}" for name in ATTRIBUTES if name not in names]
    module = sys.modules.get(getattr(base, "__module__", ""))
    cycle = getattr(module, "RequestResponseCycle", None)
    cycle_names = getattr(getattr(getattr(cycle, "__init__", None), "__code__", None),
                          "co_names", ())
    if "response_complete" not in cycle_names:
        missing.append("RequestResponseCycle.response_complete")
    return missing


def with_header_timeout(base: type, timeout_s: float) -> type:
    """`base` (a uvicorn HTTP protocol class) with the header read timeout."""
    return type(f"HeaderTimeout{base.__name__}", (HeaderDeadline, base),
                {"header_read_timeout_s": float(timeout_s), BASE_MARK: base,
                 "__module__": __name__, "__doc__": HeaderDeadline.__doc__})


def install_header_timeout(timeout_s: float) -> bool:
    """Make uvicorn's "auto" HTTP protocol (the one Serve's proxy uses) close connections whose
    headers are not complete within `timeout_s`. Idempotent (a second call replaces the
    timeout). False, with a warning, when uvicorn's internals are not what this was checked
    against: then nothing is changed."""
    try:
        from uvicorn.protocols.http import auto
    except ImportError as exc:
        log.warning("header read timeout not installed: %s", exc)
        return False
    current = getattr(auto, "AutoHTTPProtocol", None)
    base = getattr(current, BASE_MARK, current)
    missing = ["uvicorn.protocols.http.auto.AutoHTTPProtocol"] if base is None else \
        missing_internals(base)
    if missing or base is None:
        log.warning("header read timeout NOT installed: uvicorn's HTTP protocol lacks %s "
                    "(checked with uvicorn 0.54); connections that never finish their headers "
                    "stay open", ", ".join(missing))
        return False
    auto.AutoHTTPProtocol = with_header_timeout(base, timeout_s)
    log.info("header read timeout: %g s (%s)", timeout_s, base.__name__)
    return True
