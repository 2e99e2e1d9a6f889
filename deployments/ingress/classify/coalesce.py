"""Coalescing the ingress's calls to one family: calls that arrive in the same turn of the event
loop travel to the classifier as one `classify_many` call.

Every handle call costs both ends a fixed amount of CPU (Serve's routing, gRPC, pickling:
~1 ms on the ingress and ~2 ms on the classifier on the 2-core machine of docs/front.md),
whatever it carries. Under load, when the CPU is the bottleneck, several requests are parsed in
one loop turn; sending them together pays that cost once. No call waits for a batch to fill:
the batch is flushed at the end of the turn it opened in (`call_soon`), so an idle server adds
no latency. Each caller still waits only until its own deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deployments.dispatch import Attempt, call_until, classify_outcome
from deployments.wire import ClassifyCall, ClassifyOutcome


def call_bytes(call: ClassifyCall) -> int:
    """The bytes a call's inputs carry (their strings: base64 images, audio; text)."""
    return sum(len(v) for item in call.inputs for v in item.values()
               if isinstance(v, (str, bytes)))


@dataclass
class _Pending:
    call: ClassifyCall
    wait_s: float
    answer: asyncio.Future[Attempt]


class Coalescer:
    """One per family (per ingress replica). `observe(n)` is told the size of every call sent."""

    def __init__(self, handle: Any, max_calls: int,
                 observe: Callable[[int], None] = lambda n: None,
                 max_bytes: int | None = None) -> None:
        """`max_bytes`: a merged call carries at most this many bytes of inputs (a call larger
        on its own travels alone), under the gRPC message limit between replicas."""
        self.handle = handle
        self.max_calls = max_calls
        self.max_bytes = max_bytes
        self.observe = observe
        self.pending: list[_Pending] = []
        self.pending_bytes = 0

    async def classify(self, call: ClassifyCall, wait_s: float) -> ClassifyOutcome:
        """The call's outcome, waiting at most `wait_s` (then its items are answered
        deadline_exceeded; a dead replica is retried within that time)."""
        loop = asyncio.get_running_loop()
        entry = _Pending(call, wait_s, loop.create_future())
        size = call_bytes(call)
        if (self.max_bytes is not None and self.pending
                and self.pending_bytes + size > self.max_bytes):
            self._flush()
        self.pending.append(entry)
        self.pending_bytes += size
        if len(self.pending) >= self.max_calls:
            self._flush()
        elif len(self.pending) == 1:
            loop.call_soon(self._flush)
        try:
            attempt = await asyncio.wait_for(asyncio.shield(entry.answer), timeout=wait_s)
        except TimeoutError:
            attempt = Attempt()
        return classify_outcome(call, attempt)

    def _flush(self) -> None:
        batch, self.pending, self.pending_bytes = self.pending, [], 0
        if batch:
            asyncio.get_running_loop().create_task(self._send(batch))

    async def _send(self, batch: list[_Pending]) -> None:
        calls = [p.call for p in batch]
        self.observe(len(calls))
        until_s = time.time() + max(p.wait_s for p in batch)
        attempt = await call_until(lambda: self.handle.classify_many.remote(calls), until_s)
        if attempt.answered and len(attempt.value or ()) != len(calls):
            attempt = Attempt(error=f"{len(attempt.value or ())} outcomes for {len(calls)} calls")
        for i, p in enumerate(batch):
            if not p.answer.done():
                p.answer.set_result(Attempt(attempt.value[i], answered=True)
                                    if attempt.answered else attempt)
