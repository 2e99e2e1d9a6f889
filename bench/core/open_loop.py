"""The one open-loop sender: request i goes out at its arrival time whatever the earlier
answers did (a closed loop would slow down with the server and hide its queueing).

    results = await open_loop(arrivals_s, send)          # a finite arrival process
    results = await open_loop(poisson(qps, seed), send, stop=stop)   # until `stop` is set

`send(i, scheduled_s, lag_ms)` makes request i and returns its record (it must not raise: every
outcome is a record); `lag_ms` is how late the client itself was to send it. The protocol (JSON,
SSE) is the sender's: bench/core/client.py (classify), bench/core/stream_client.py (chat).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TypeVar

import numpy as np

R = TypeVar("R")


def poisson(qps: float, seed: int) -> Iterator[float]:
    """Unbounded Poisson arrival times (s from the start) at `qps`, seeded."""
    rng = np.random.default_rng(seed)
    t = 0.0
    while True:
        t += float(rng.exponential(1.0 / qps))
        yield t


async def _until(t0: float, t: float, stop: asyncio.Event | None) -> bool:
    """Sleep until loop time t0 + t; False when `stop` was set first."""
    loop = asyncio.get_running_loop()
    delay = t0 + t - loop.time()
    if stop is None:
        if delay > 0:
            await asyncio.sleep(delay)
        return True
    if stop.is_set():
        return False
    if delay > 0:
        try:
            await asyncio.wait_for(stop.wait(), delay)
            return False
        except TimeoutError:
            return True
    return True


async def open_loop(arrivals_s: Iterable[float],
                    send: Callable[[int, float, float], Awaitable[R]], *,
                    start_delay_s: float = 0.0, stop: asyncio.Event | None = None) -> list[R]:
    """Send request i at `start + arrivals_s[i]`; the records in send order, once every request
    sent has one. With `stop`, no request is sent after it is set."""
    loop = asyncio.get_running_loop()
    t0 = loop.time() + start_delay_s
    tasks: list[asyncio.Task[R]] = []
    for i, t in enumerate(arrivals_s):
        if not await _until(t0, t, stop):
            break
        lag_ms = max(0.0, (loop.time() - t0 - t) * 1000.0)
        tasks.append(asyncio.create_task(send(i, t, lag_ms)))  # type: ignore[arg-type]
    records = list(await asyncio.gather(*tasks))
    if len(records) != len(tasks):  # cannot happen: gather keeps one result per task
        raise RuntimeError(f"{len(tasks)} sent, {len(records)} records")
    return records
