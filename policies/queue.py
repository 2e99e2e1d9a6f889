"""A replica's deadline-ordered queue and its arrival-rate estimate (no Ray, no asyncio).

The classifier replica (and each replica of the simulator) owns one `DeadlineQueue`; the
scheduling step (policies/schedulers/step.py) reads a snapshot of it as `PendingItem`s
(deadline order), and the replica pops the items the step names: expired, dropped or run.
"""

from __future__ import annotations

import bisect
import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from policies.schedulers.base import PendingItem


@dataclass
class QueuedItem:
    """A queued item: what the scheduler sees plus what the replica needs to run and answer it."""

    pending: PendingItem
    tensors: dict[str, Any]
    waiter: Any  # the asyncio.Future the submitting call awaits
    queued_s: float = 0.0  # when the replica queued it (wall clock, as PendingItem's times)

    @property
    def item_id(self) -> str:
        return self.pending.item_id


class DeadlineQueue:
    """Items ordered by (deadline, arrival sequence); bounded by `max_items`."""

    def __init__(self, max_items: int) -> None:
        if max_items < 1:
            raise ValueError(f"max_items must be >= 1, got {max_items}")
        self.max_items = max_items
        self._keys: list[tuple[float, int]] = []
        self._items: list[QueuedItem] = []
        self._by_id: dict[str, QueuedItem] = {}
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[QueuedItem]:
        return iter(list(self._items))

    def free_slots(self) -> int:
        return self.max_items - len(self._items)

    def push(self, item: QueuedItem) -> None:
        if item.item_id in self._by_id:
            raise ValueError(f"item {item.item_id!r} is already queued")
        if not self.free_slots():
            raise OverflowError(f"queue full ({self.max_items} items)")
        key = (item.pending.deadline_s, next(self._seq))
        i = bisect.bisect_right(self._keys, key)
        self._keys.insert(i, key)
        self._items.insert(i, item)
        self._by_id[item.item_id] = item

    def pending(self, task: str | None = None) -> tuple[PendingItem, ...]:
        """Snapshot in deadline order (optionally one task's items only)."""
        if task is None:
            return tuple([q.pending for q in self._items])
        return tuple([q.pending for q in self._items if q.pending.task == task])

    def head(self) -> QueuedItem | None:
        return self._items[0] if self._items else None

    def pop(self, item_ids: tuple[str, ...] | list[str]) -> list[QueuedItem]:
        """Remove and return the named items, in the order named; unknown ids are skipped."""
        wanted = [self._by_id[i] for i in item_ids if i in self._by_id]
        if not wanted:
            return []
        gone = {id(q) for q in wanted}
        keep = [(k, q) for k, q in zip(self._keys, self._items, strict=True) if id(q) not in gone]
        self._keys = [k for k, _ in keep]
        self._items = [q for _, q in keep]
        for q in wanted:
            del self._by_id[q.item_id]
        return wanted

    def drain(self) -> list[QueuedItem]:
        """Remove and return everything (replica shutdown)."""
        return self.pop([q.item_id for q in self._items])

    def earliest_deadline_s(self) -> float | None:
        return self._items[0].pending.deadline_s if self._items else None


class RateWindow:
    """Arrivals per second over the last `window_s` seconds (times passed in, no clock).

    The window is the half-open interval (now - window_s, now]: an arrival exactly `window_s`
    old has left it, so a steady stream of r arrivals per second counts r x window_s, never one
    more (RAMSIS's load monitor and OTAS's rate estimate count the same way). The one window of
    the replica loop and of every simulator.
    """

    def __init__(self, window_s: float, full_span: bool = False) -> None:
        """`full_span`: divide by the whole window from the first arrival on (RAMSIS's monitor,
        OTAS); otherwise by the time since the first arrival until the window fills (at least
        0.25 s), so a fresh replica does not under-estimate a burst."""
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.window_s = window_s
        self.full_span = full_span
        self._times: deque[float] = deque()
        self._started_s: float | None = None

    def add(self, now_s: float, count: int = 1) -> None:
        if self._started_s is None:
            self._started_s = now_s
        times = self._times
        if count == 1:
            times.append(now_s)
        elif count > 1:
            times.extend([now_s] * count)
        else:
            return
        cutoff = now_s - self.window_s  # bounded memory even when nobody asks for the rate
        while times[0] <= cutoff:
            times.popleft()

    def rate(self, now_s: float) -> float:
        """Arrivals per second in the window ending at `now_s`."""
        times, cutoff = self._times, now_s - self.window_s
        while times and times[0] <= cutoff:
            times.popleft()
        if self.full_span:
            return len(times) / self.window_s
        if self._started_s is None or not times:
            return 0.0
        return len(times) / min(self.window_s, max(now_s - self._started_s, 0.25))
