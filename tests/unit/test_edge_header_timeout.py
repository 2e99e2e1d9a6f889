"""The proxy's header read timeout (deployments/ingress/proxy/header_timeout.py) on uvicorn's own HTTP
protocols (httptools and h11), served from a local socket without Ray: headers not complete in
time -> 408 `header_timeout` + close; a connection mid-body, streaming an answer, or idle
between requests (the keep-alive timer's) is left alone; missing uvicorn internals -> a warning
and nothing installed."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.protocols.http import auto
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from deployments.ingress.proxy.edge import EdgeConfig, edge_from_env
from deployments.ingress.proxy.front_door import proxy_middlewares
from deployments.ingress.proxy.header_timeout import (
    BASE_MARK,
    install_header_timeout,
    missing_internals,
    with_header_timeout,
)

TIMEOUT_S = 0.4
EARLY_S = 0.05  # a timer never fires earlier than this before its time (clock resolution)
GUARD_S = 30.0  # only to fail instead of hanging: no assertion rests on how fast the box is
BASES = [HttpToolsProtocol, H11Protocol]
GET = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """/x: 200 "ok" once the body is in; /stream: ten chunks 0.1 s apart."""
    while (await receive()).get("more_body", False):
        pass
    stream = scope["path"] == "/stream"
    headers = [] if stream else [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if stream:
        for _ in range(10):
            await asyncio.sleep(0.1)
            await send({"type": "http.response.body", "body": b"chunk", "more_body": True})
    await send({"type": "http.response.body", "body": b"ok"})


@asynccontextmanager
async def serving(base: type, keep_alive_s: float = 5.0) -> AsyncIterator[int]:
    """The wrapped protocol on 127.0.0.1 (the way uvicorn's Server makes its protocols)."""
    loop = asyncio.get_running_loop()
    config = Config(app, lifespan="off", log_config=None, access_log=False,
                    timeout_keep_alive=keep_alive_s)  # type: ignore[arg-type]
    config.load()
    cls, state = with_header_timeout(base, TIMEOUT_S), ServerState()
    server = await loop.create_server(
        lambda: cls(config=config, server_state=state, app_state={}, _loop=loop),
        "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for conn in list(state.connections):
            conn.transport.abort()


async def read_all(reader: asyncio.StreamReader, timeout_s: float) -> tuple[bytes, float]:
    """Everything until the server closes, and when it closed (seconds from now)."""
    t0, out = time.perf_counter(), b""
    async with asyncio.timeout(timeout_s):
        try:
            while chunk := await reader.read(65536):
                out += chunk
        except ConnectionResetError:
            pass
    return out, time.perf_counter() - t0


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize("base", BASES)
def test_partial_headers_get_408_and_are_closed_while_others_are_served(base: type) -> None:
    async def go() -> None:
        async with serving(base) as port:
            t0 = time.perf_counter()  # before the connection exists, so before its clock starts
            slow_r, slow_w = await asyncio.open_connection("127.0.0.1", port)
            slow_w.write(b"POST /x HTTP/1.1\r\nHost: t\r\nX-Slow: a")

            async def drip() -> None:  # a byte every TIMEOUT_S / 4, for as long as it is open:
                while True:  # were each byte to reset the clock, the 408 would never come
                    await asyncio.sleep(TIMEOUT_S / 4)
                    slow_w.write(b"a")

            dripping = asyncio.create_task(drip())
            try:
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(GET.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
                ok, _ = await read_all(r, GUARD_S)
                assert ok.startswith(b"HTTP/1.1 200") and ok.endswith(b"ok")
                answer, _ = await read_all(slow_r, GUARD_S)
                closed_s = time.perf_counter() - t0
            finally:
                dripping.cancel()
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408") and b"connection: close" in head.lower()
            assert json.loads(body)["error"]["type"] == "header_timeout"
            assert closed_s >= TIMEOUT_S - EARLY_S, closed_s  # the timer's, not anything sooner
            slow_w.close()
    run(go())


@pytest.mark.parametrize("base", BASES)
def test_a_silent_connection_is_closed_too(base: type) -> None:
    async def go() -> None:
        async with serving(base) as port:
            t0 = time.perf_counter()
            r, w = await asyncio.open_connection("127.0.0.1", port)
            answer, _ = await read_all(r, GUARD_S)  # no 408 at all: TimeoutError
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert time.perf_counter() - t0 >= TIMEOUT_S - EARLY_S
            w.close()
    run(go())


@pytest.mark.parametrize("base", BASES)
def test_slow_body_and_streaming_answer_are_not_touched(base: type) -> None:
    async def go() -> None:
        async with serving(base) as port:
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 8\r\n\r\n")
            for _ in range(8):  # the body takes 2 x the header timeout: not its business
                await asyncio.sleep(2 * TIMEOUT_S / 8)
                w.write(b"b")
            w.write(b"GET /stream HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            answer, _ = await read_all(r, GUARD_S)  # the stream takes 1 s = 2.5 x the timeout
            assert answer.count(b"HTTP/1.1 200") == 2 and b"408" not in answer
            assert answer.endswith(b"ok\r\n0\r\n\r\n") and answer.count(b"5\r\nchunk\r\n") == 10
            w.close()
    run(go())


@pytest.mark.parametrize("base", BASES)
def test_kept_alive_idle_is_the_keep_alive_timers_then_the_clock_restarts(base: type) -> None:
    async def go() -> None:
        async with serving(base, keep_alive_s=GUARD_S) as port:  # keep-alive never fires here
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(GET)
            first = await asyncio.wait_for(r.read(65536), GUARD_S)
            assert first.startswith(b"HTTP/1.1 200")
            await asyncio.sleep(2 * TIMEOUT_S)  # idle past the header timeout: still open
            w.write(GET)
            again = await asyncio.wait_for(r.read(65536), GUARD_S)
            assert again.startswith(b"HTTP/1.1 200")
            await asyncio.sleep(2 * TIMEOUT_S)  # idle again: no 408 waiting before the next bytes
            t0 = time.perf_counter()
            w.write(b"GET /x HTTP/1.1\r\nHo")  # the next request's first bytes start the clock
            answer, _ = await read_all(r, GUARD_S)  # never restarted: TimeoutError
            assert answer.startswith(b"HTTP/1.1 408")
            assert time.perf_counter() - t0 >= TIMEOUT_S - EARLY_S  # started by those bytes
            w.close()
        keep_alive_s = 2 * TIMEOUT_S
        async with serving(base, keep_alive_s=keep_alive_s) as port:
            r2, w2 = await asyncio.open_connection("127.0.0.1", port)
            t0 = time.perf_counter()  # before the response, so before the keep-alive timer
            w2.write(GET)
            assert (await asyncio.wait_for(r2.read(65536), GUARD_S)).startswith(b"HTTP/1.1 200")
            idle, _ = await read_all(r2, GUARD_S)
            closed_s = time.perf_counter() - t0
            assert idle == b"", idle  # keep-alive's silent close, no 408
            assert closed_s >= keep_alive_s - EARLY_S, closed_s  # open past the header timeout
            w2.close()
    run(go())


def test_header_read_timeout_is_an_edge_key_validated_like_the_others() -> None:
    assert EdgeConfig().header_read_timeout_s == 10.0
    edge = edge_from_env({"ADAPTSERVE_EDGE": '{"header_read_timeout_s": 2.5}'})
    assert edge.header_read_timeout_s == 2.5
    for raw in ('{"header_read_timeout_s": 0}', '{"header_read_timeout_s": -1}',
                '{"header_read_timeout_s": "x"}', '{"header_timeout_s": 3}'):
        with pytest.raises(ValueError):
            edge_from_env({"ADAPTSERVE_EDGE": raw})


def test_proxy_callback_installs_it_on_uvicorns_auto_protocol(
        monkeypatch: pytest.MonkeyPatch) -> None:
    original = auto.AutoHTTPProtocol
    monkeypatch.setattr(auto, "AutoHTTPProtocol", original)  # restored after the test
    monkeypatch.setenv("ADAPTSERVE_EDGE", '{"header_read_timeout_s": 3}')
    proxy_middlewares()
    installed = auto.AutoHTTPProtocol
    assert issubclass(installed, original) and getattr(installed, BASE_MARK) is original
    assert installed.header_read_timeout_s == 3.0  # type: ignore[attr-defined]
    assert install_header_timeout(7)  # again: wraps the original, not the wrapper
    assert getattr(auto.AutoHTTPProtocol, BASE_MARK) is original
    assert auto.AutoHTTPProtocol.header_read_timeout_s == 7.0  # type: ignore[attr-defined]
    config = Config(app)  # as Serve's proxy makes it: no http=, so "auto"
    config.load()
    assert config.http_protocol_class is auto.AutoHTTPProtocol


def test_missing_uvicorn_internals_warn_and_install_nothing(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    assert missing_internals(HttpToolsProtocol) == [] and missing_internals(H11Protocol) == []

    class Other(asyncio.Protocol):  # a future uvicorn without these hooks
        def __init__(self) -> None:
            self.transport = None

    assert "on_response_complete" in missing_internals(Other)
    assert "self.cycle" in missing_internals(Other)
    monkeypatch.setattr(auto, "AutoHTTPProtocol", Other)
    with caplog.at_level(logging.WARNING, "deployments.ingress.proxy.header_timeout"):
        assert not install_header_timeout(10)
    assert auto.AutoHTTPProtocol is Other
    assert "NOT installed" in caplog.text and "self.cycle" in caplog.text

