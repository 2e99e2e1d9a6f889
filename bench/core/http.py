"""Blocking HTTP calls for scripts and tests, on the load generator's client library (aiohttp),
so that the project speaks HTTP through one library. Each call runs its own short event loop:
meant for a handful of calls (health checks, an example request, API tests), never for load,
and never from inside a running event loop.

    r = post_json("http://127.0.0.1:8000/v1/classify", body)
    r.status_code, r.headers["content-type"], r.json()
"""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass
from typing import Any

import aiohttp

JSON_TYPE = "application/json"


@dataclass(frozen=True)
class HttpResponse:
    """One answer, read whole. Header names are lower-cased (HTTP names are case-insensitive)."""

    status_code: int
    headers: dict[str, str]
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


class HttpTransportError(Exception):
    """No HTTP answer at all: connection refused or reset, or no answer within the timeout."""


async def _request(method: str, url: str, data: bytes | None, headers: dict[str, str],
                   timeout_s: float) -> HttpResponse:
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session, session.request(
                method, url, data=data, headers=headers) as resp:
            body = await resp.read()
            return HttpResponse(resp.status, {k.lower(): v for k, v in resp.headers.items()},
                                body)
    except TimeoutError as exc:
        raise HttpTransportError(f"{method} {url}: no answer within {timeout_s:g} s") from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise HttpTransportError(f"{method} {url}: {type(exc).__name__}: {exc}") from exc


def request(method: str, url: str, data: bytes | None = None,
            headers: dict[str, str] | None = None, timeout_s: float = 30.0) -> HttpResponse:
    """Send one request and read the whole answer; raises HttpTransportError without one."""
    return asyncio.run(_request(method, url, data, dict(headers or {}), timeout_s))


def get(url: str, timeout_s: float = 30.0) -> HttpResponse:
    return request("GET", url, timeout_s=timeout_s)


def post_bytes(url: str, data: bytes, content_type: str = JSON_TYPE,
               timeout_s: float = 30.0) -> HttpResponse:
    """POST a body as is (tests send malformed JSON this way)."""
    return request("POST", url, data, {"content-type": content_type}, timeout_s)


def post_json(url: str, body: Any, timeout_s: float = 30.0) -> HttpResponse:
    return post_bytes(url, json.dumps(body).encode(), JSON_TYPE, timeout_s)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (for a server about to start)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
