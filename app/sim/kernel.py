"""Event heap keyed (time, priority, seq): simultaneous events run in priority order, then in the
order they were scheduled, so a run is fully deterministic."""

from __future__ import annotations

import heapq
from enum import IntEnum


class EventKind(IntEnum):
    """Lower value runs first at equal time: a finishing batch frees its worker before an
    arrival at the same instant is routed, as in a real server."""

    BATCH_DONE = 0
    ARRIVAL = 1
    TICK = 2


class EventQueue:
    """Min-heap of (time_s, kind, seq, payload). `payload` is an int (query or worker id)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, int]] = []
        self._seq = 0

    def push(self, time_s: float, kind: EventKind, payload: int) -> None:
        heapq.heappush(self._heap, (time_s, int(kind), self._seq, payload))
        self._seq += 1

    def pop(self) -> tuple[float, int, int, int]:
        return heapq.heappop(self._heap)

    def __len__(self) -> int:
        return len(self._heap)
