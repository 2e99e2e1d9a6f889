"""The clients of the node-loss benchmark (bench/experiments/node_loss/run.py), on asyncio + aiohttp:

- `send_load`: single `/v1/classify` requests at Poisson arrivals (open loop: each sent at its
  time whatever happened to earlier ones, one task each), every one with its own request id
  (`X-Request-Id`, which Serve's proxy echoes as `X-Request-ID`) and `X-Request-Start`; every
  request gets exactly one `Answer`: its HTTP status and error type, or the transport error or
  timeout that took its place;
- `watch`: `GET /healthz` or `/v1/status` every `period_s`, one `Probe` each (the family's
  health as that route tells it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp

from bench.core.answers import outcome_of
from bench.core.client import REQUEST_START, request_start_value
from bench.core.open_loop import open_loop, poisson


@dataclass(frozen=True)
class Answer:
    """One request and what came back (exactly one per request sent)."""

    request_id: str
    sent_s: float  # unix time at send
    status: int = 0  # HTTP status; 0: no answer
    latency_ms: float | None = None  # send -> whole answer read; None without an answer
    outcome: str = ""  # 200: the result's status (ok, deadline_exceeded, shed); else the
    #                    error type (unavailable, overloaded, ...); "timeout" / "transport"
    echoed_id: str | None = None  # the answer's X-Request-ID
    error: str | None = None

    @property
    def answer_s(self) -> float | None:
        return None if self.latency_ms is None else self.sent_s + self.latency_ms / 1000.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Probe:
    """One health read: `state` is /healthz's body status (ok, degraded) or error type, or the
    family's health state in /v1/status (up, suspect, down, starting)."""

    route: str
    sent_s: float
    status: int = 0
    latency_ms: float | None = None
    state: str | None = None
    healthy: bool | None = None  # /v1/status: the family's `healthy`; /healthz: status 200
    live_replicas: int | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def _one(session: aiohttp.ClientSession, url: str, body: bytes,
               request_id: str) -> Answer:
    sent = time.time()
    start = time.perf_counter()
    headers = {"content-type": "application/json", "X-Request-Id": request_id,
               REQUEST_START: request_start_value(sent)}
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            text = await resp.read()
            latency = 1000.0 * (time.perf_counter() - start)
            return Answer(request_id, sent, resp.status, latency, outcome_of(resp.status, text),
                          resp.headers.get("X-Request-ID"),
                          None if resp.status == 200 else text[:300].decode("utf-8", "replace"))
    except TimeoutError:
        return Answer(request_id, sent, outcome="timeout", error="no answer within timeout")
    except (aiohttp.ClientError, OSError) as exc:
        return Answer(request_id, sent, outcome="transport",
                      error=f"{type(exc).__name__}: {exc}"[:300])


async def send_load(url: str, bodies: Sequence[bytes], qps: float, seed: int,
                    stop: asyncio.Event, timeout_s: float, answers: list[Answer]) -> None:
    """Poisson arrivals at `qps` to `url` until `stop` is set; appends each request's Answer to
    `answers` as it comes back and returns once every request sent has one."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
        async def one(i: int, _t: float, _lag_ms: float) -> None:
            answers.append(await _one(session, url, bodies[i % len(bodies)], f"nodeloss-{i:06d}"))

        await open_loop(poisson(qps, seed), one, stop=stop)


def _read_probe(route: str, family: str, sent: float, status: int, latency_ms: float,
                body: bytes) -> Probe:
    try:
        data = json.loads(body)
    except ValueError:
        return Probe(route, sent, status, latency_ms, error=body[:200].decode("utf-8", "replace"))
    if not isinstance(data, dict):
        return Probe(route, sent, status, latency_ms, error=str(data)[:200])
    if route == "/healthz":
        state = data.get("status") if status == 200 else outcome_of(status, body)
        return Probe(route, sent, status, latency_ms, str(state), status == 200)
    entry = (data.get("deployments") or {}).get(family)
    if not isinstance(entry, dict):
        return Probe(route, sent, status, latency_ms, error=str(data)[:200])
    health = entry.get("health") or {}
    return Probe(route, sent, status, latency_ms, health.get("state"), entry.get("healthy"),
                 entry.get("live_replicas"))


async def watch(base_url: str, route: str, family: str, period_s: float, stop: asyncio.Event,
                timeout_s: float, probes: list[Probe]) -> None:
    """GET `route` every `period_s` (one at a time) until `stop`; one Probe per read."""
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while not stop.is_set():
            sent, start = time.time(), time.perf_counter()
            try:
                async with session.get(base_url + route) as resp:
                    body = await resp.read()
                    probes.append(_read_probe(route, family, sent, resp.status,
                                              1000.0 * (time.perf_counter() - start), body))
            except TimeoutError:
                probes.append(Probe(route, sent, error="no answer within timeout"))
            except (aiohttp.ClientError, OSError) as exc:
                probes.append(Probe(route, sent, error=f"{type(exc).__name__}: {exc}"[:200]))
            left_s = period_s - (time.perf_counter() - start)
            if left_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), left_s)


async def loop_lag(stop: asyncio.Event, lags: list[tuple[float, float]], period_s: float = 0.05,
                   report_ms: float = 20.0) -> None:
    """This process's event-loop lag (sleeps overrun by more than `report_ms`), so that a slow
    answer can be told from a client that was late to read it: (unix time, lag ms)."""
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(period_s)
        lag_ms = 1000.0 * (time.perf_counter() - start - period_s)
        if lag_ms > report_ms:
            lags.append((time.time(), lag_ms))
