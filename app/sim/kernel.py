"""The one event loop of every simulator: a heap keyed (time, priority, seq).

Simultaneous events run in priority order, then in the order they were scheduled, so a run is
fully deterministic. A handler receives the event's time and its integer payload (a query, job,
worker or replica index) and schedules whatever follows with `at`. Hand-written rather than
simpy: on the RAMSIS 500k-query run simpy's callback events were about 15% slower (see
docs/architecture.md), and no simulator here needs processes.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

Handler = Callable[[float, int], None]


class Kernel:
    """Run handlers in (time_s, priority, seq) order until no event is left.

    Each simulator names its own priorities (lower runs first at equal times), e.g. a finishing
    batch frees its worker before an arrival at the same instant is routed, as in a real server.
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Handler, int]] = []
        self._seq = 0

    def at(self, time_s: float, priority: int, handler: Handler, payload: int = 0) -> None:
        heapq.heappush(self._heap, (time_s, priority, self._seq, handler, payload))
        self._seq += 1

    def feed(self, times_s: Sequence[float], priority: int, handler: Handler) -> None:
        """Schedule sorted `times_s` one at a time: event i (payload i) schedules event i + 1
        before `handler` runs, so the heap stays small on a half-million-query trace."""
        n = len(times_s)

        def arrive(time_s: float, i: int) -> None:
            if i + 1 < n:
                self.at(times_s[i + 1], priority, arrive, i + 1)
            handler(time_s, i)

        if n:
            self.at(times_s[0], priority, arrive, 0)

    def run(self) -> None:
        heap, pop = self._heap, heapq.heappop
        while heap:
            time_s, _, _, handler, payload = pop(heap)
            handler(time_s, payload)

    def __len__(self) -> int:
        return len(self._heap)
