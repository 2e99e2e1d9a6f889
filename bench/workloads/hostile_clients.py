"""The hostile clients of the reliability benchmark (bench/experiments/reliability/run.py), on raw asyncio
TCP streams where HTTP clients would not misbehave the way an attacker does:

- `slowloris`: N connections, each sending the head of a POST with a Content-Length and then a
  few bytes of body every second, never finishing (the edge should answer 408 after its body
  read timeout and close);
- `slow_headers`: N connections, each sending a request line and headers and then one more
  header byte every second, never finishing the headers (what the server does with them is
  the figure: uvicorn, under Serve's proxy, has no header timeout);
- `chunked_upload`: one `Transfer-Encoding: chunked` body of hundreds of MB with no
  Content-Length (the edge should answer 413 as soon as the limit passes, long before the end);
- `send_malformed`: the malformed set (bench/workloads/hostile_bodies.py), one request at a time,
  each answer's status and whether it is a JSON error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import resource
import time
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

from bench.workloads.hostile_bodies import BadRequest

SLOW_PREFIX = b'{"model": "vit", "items": ['


def raise_fd_limit() -> tuple[int, int]:
    """Raise this process's soft RLIMIT_NOFILE to its hard limit (Ray's processes, started
    after, inherit it); returns (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def request_head(path: str, length: int | None) -> bytes:
    size = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: bench\r\n"
            b"Content-Type: application/json\r\n" + size + b"\r\n\r\n")


def status_of(answer: bytes) -> int | None:
    """The status code of a raw HTTP/1.1 answer, None when there is none."""
    parts = answer.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
        return None
    try:
        return int(parts[1])
    except ValueError:
        return None


@dataclass(frozen=True)
class RawAnswer:
    status: int | None  # None: no answer (or not HTTP)
    answer_s: float | None  # from the request's first byte to the answer's first byte
    closed: bool  # the server closed the connection after answering
    sent_bytes: int
    error: str | None = None
    head: str = ""  # the answer's first bytes
    closed_s: float | None = None  # from the request's first byte to the server's close

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


CLOSE_WAIT_S = 10.0  # how long after its answer the server may take to close


async def _read_answer(reader: asyncio.StreamReader, t0: float,
                       timeout_s: float) -> tuple[bytes, float | None, float | None]:
    """(bytes, seconds to the first byte, seconds to the close) of an answer: the first bytes
    within `timeout_s`, then the rest until EOF for at most CLOSE_WAIT_S."""
    try:
        first = await asyncio.wait_for(reader.read(65536), timeout_s)
    except TimeoutError:
        return b"", None, None
    except OSError:  # a reset: the server closed, with our bytes unread
        return b"", None, time.perf_counter() - t0
    if not first:
        return b"", None, time.perf_counter() - t0
    at_s = time.perf_counter() - t0
    out, closed_s = first, None
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CLOSE_WAIT_S):
            try:
                while chunk := await reader.read(65536):
                    out += chunk
            except OSError:
                pass  # a reset after the answer: closed too
            closed_s = time.perf_counter() - t0
    return out, at_s, closed_s


async def slow_client(host: str, port: int, path: str, length: int, period_s: float,
                      give_up_s: float) -> RawAnswer:
    """One slowloris connection: the head, then one byte of body every `period_s` until the
    server answers or `give_up_s` passes."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as exc:
        return RawAnswer(None, None, False, 0, f"connect: {type(exc).__name__}: {exc}")
    t0 = time.perf_counter()
    answer = asyncio.create_task(_read_answer(reader, t0, give_up_s))
    body = SLOW_PREFIX + b" " * length
    sent = 0
    try:
        writer.write(request_head(path, length) + body[:8])
        sent = 8
        while not answer.done() and sent < length - 1:
            await asyncio.wait({answer}, timeout=period_s)
            if not answer.done():
                writer.write(body[sent:sent + 1])
                await writer.drain()
                sent += 1
    except OSError:
        pass  # the server closed the connection
    data, at_s, closed_s = await answer
    writer.close()
    return RawAnswer(status_of(data), at_s, closed_s is not None, sent,
                     head=data[:120].decode(errors="replace"), closed_s=closed_s)


async def slowloris(host: str, port: int, path: str, clients: int, length: int,
                    period_s: float, give_up_s: float) -> list[RawAnswer]:
    return list(await asyncio.gather(*(slow_client(host, port, path, length, period_s, give_up_s)
                                       for _ in range(clients))))


def header_head(path: str) -> bytes:
    """A request line and the first headers, the last one left open (no CRLF after it)."""
    return (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: bench\r\n"
            b"Content-Type: application/json\r\nX-Slow: ")


async def slow_header_client(host: str, port: int, path: str, period_s: float,
                             give_up_s: float) -> RawAnswer:
    """One slow-header connection: a request line and headers, then one more header byte
    every `period_s`, never ending the headers, until the server answers or closes, or
    `give_up_s` passes (then this client closes it: `closed` stays False)."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as exc:
        return RawAnswer(None, None, False, 0, f"connect: {type(exc).__name__}: {exc}")
    t0 = time.perf_counter()
    answer = asyncio.create_task(_read_answer(reader, t0, give_up_s))
    head = header_head(path)
    sent, error = len(head), None
    try:
        writer.write(head)
        while not answer.done():
            await asyncio.wait({answer}, timeout=period_s)
            if not answer.done():
                writer.write(b"a")
                await writer.drain()
                sent += 1
    except OSError as exc:
        error = type(exc).__name__  # the server closed the connection
    data, at_s, closed_s = await answer
    writer.close()
    return RawAnswer(status_of(data), at_s, closed_s is not None, sent, error,
                     data[:120].decode(errors="replace"), closed_s)


async def slow_headers(host: str, port: int, path: str, clients: int, period_s: float,
                       give_up_s: float) -> list[RawAnswer]:
    return list(await asyncio.gather(*(slow_header_client(host, port, path, period_s, give_up_s)
                                       for _ in range(clients))))


async def chunked_upload(host: str, port: int, path: str, total_bytes: int, chunk_bytes: int,
                         timeout_s: float) -> RawAnswer:
    """Stream `total_bytes` of chunked body (no Content-Length) until the server answers; the
    answer and how many body bytes had been sent by then."""
    try:
        reader, writer = await asyncio.open_connection(host, port)
    except OSError as exc:
        return RawAnswer(None, None, False, 0, f"connect: {type(exc).__name__}: {exc}")
    t0 = time.perf_counter()
    answer = asyncio.create_task(_read_answer(reader, t0, timeout_s))
    frame = b"%x\r\n" % chunk_bytes + b" " * chunk_bytes + b"\r\n"
    sent, error = 0, None
    try:
        writer.write(request_head(path, None) + b"%x\r\n" % len(SLOW_PREFIX) + SLOW_PREFIX
                     + b"\r\n")
        while sent < total_bytes and not answer.done():
            writer.write(frame)
            await asyncio.wait_for(writer.drain(), timeout_s)
            sent += chunk_bytes
        if not answer.done():
            writer.write(b"0\r\n\r\n")
    except (OSError, TimeoutError) as exc:
        error = type(exc).__name__  # the server closed (or stopped reading) after answering
    data, at_s, closed_s = await answer
    writer.close()
    return RawAnswer(status_of(data), at_s, closed_s is not None, sent, error,
                     data[:200].decode(errors="replace"), closed_s)


@dataclass(frozen=True)
class MalformedAnswer:
    name: str
    status: int | None
    json_error: bool  # the answer is a JSON object with an "error"
    error_type: str | None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(name: str, status: int, content_type: str, body: bytes) -> MalformedAnswer:
    try:
        data = json.loads(body) if content_type.startswith("application/json") else None
    except ValueError:
        data = None
    err = data.get("error") if isinstance(data, dict) else None
    return MalformedAnswer(name, status, isinstance(err, dict),
                           err.get("type") if isinstance(err, dict) else None,
                           "" if isinstance(err, dict) else body[:120].decode(errors="replace"))


async def send_malformed(base_url: str, requests: list[BadRequest],
                         timeout_s: float = 30.0) -> list[MalformedAnswer]:
    out = []
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for r in requests:
            try:
                async with session.request(r.method, base_url + r.path, data=r.body,
                                           headers={"content-type": r.content_type}) as resp:
                    body = await resp.read()
                    out.append(judge(r.name, resp.status,
                                     resp.headers.get("content-type", ""), body))
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                out.append(MalformedAnswer(r.name, None, False, None,
                                           f"{type(exc).__name__}: {exc}"[:200]))
    return out
