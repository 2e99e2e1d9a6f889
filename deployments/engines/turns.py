"""One request at a time, lowest priority value first (ties: arrival order): the transformers
engine's scheduler. asyncio-only, no threads."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class Turns:
    def __init__(self) -> None:
        self._busy = False
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    @property
    def waiting(self) -> int:
        return sum(1 for *_, f in self._heap if not f.done())

    async def acquire(self, priority: int) -> None:
        if not self._busy:
            self._busy = True
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (priority, next(self._seq), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the turn was handed to us as we were cancelled: pass it on
            raise

    def release(self) -> None:
        while self._heap:
            *_, fut = heapq.heappop(self._heap)
            if not fut.done():
                fut.set_result(None)  # the turn passes on; _busy stays True
                return
        self._busy = False
