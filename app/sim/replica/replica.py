"""One simulated classifier replica: the live replica's queue, rate window, slowdown tracker and
scheduling step (policies/), with the batch it is running. No clock: times are passed in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from policies.queue import DeadlineQueue, QueuedItem, RateWindow
from policies.schedulers.base import BatchPlan, Drop, PendingItem, Scheduler
from policies.schedulers.slowdown import SlowdownTracker
from policies.schedulers.step import (
    Expiry,
    StepInput,
    StepOutcome,
    decide,
    expire,
    most_urgent_task,
)

MIN_WAIT_S = 1e-6


@dataclass(frozen=True)
class Answer:
    """How an item was answered (the batch fields only for "ok")."""

    outcome: str
    variant: str | None = None
    batch_size: int | None = None
    queue_ms: float | None = None
    compute_ms: float | None = None
    expected_accuracy: float | None = None


@dataclass(frozen=True)
class BatchLog:
    """A batch a replica started."""

    start_s: float
    replica: int
    variant: str
    size: int


@dataclass(frozen=True)
class RunningBatch:
    start_s: float
    duration_s: float
    variant: str
    expected_accuracy: float
    items: tuple[int, ...]  # item indices, in the order the plan named them


class SimReplica:
    """State of one replica between the simulator's events."""

    def __init__(self, scheduler: Scheduler, window_s: float, max_queued_items: int) -> None:
        self.scheduler = scheduler
        self.queue = DeadlineQueue(max_queued_items)
        self.rate = RateWindow(window_s)
        self.slowdown = SlowdownTracker()
        self.batch: RunningBatch | None = None
        self.open_calls = 0  # submit calls (requests or jobs) not fully answered
        self._wake_s: float | None = None

    def push(self, item: PendingItem) -> None:
        self.queue.push(QueuedItem(item, {}, None))

    def expire(self, pending: tuple[PendingItem, ...], now_s: float) -> Expiry:
        """Remove the items of `pending` (the queue's snapshot) whose deadline has passed."""
        expiry = expire(pending, now_s)
        if expiry.expired:
            self.queue.pop([p.item_id for p in expiry.expired])
        return expiry

    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               deployment_rate: RateWindow | None, latency_feedback: bool) -> StepOutcome:
        """The scheduling step over `pending` (the queue's snapshot); the load is the replica's
        arrival rate unless the deployment's is given."""
        load = (deployment_rate or self.rate).rate(now_s)
        factor = self.slowdown.factor if latency_feedback else 1.0
        return decide(self.scheduler, StepInput(most_urgent_task(pending), now_s, load, factor))

    def drop(self, drops: tuple[Drop, ...]) -> None:
        self.queue.pop([d.item_id for d in drops])

    def start(self, plan: BatchPlan, now_s: float,
              service: Callable[[str, int], float]) -> RunningBatch:
        items = tuple(int(q.item_id) for q in self.queue.pop(plan.item_ids))
        duration_s = service(plan.variant.name, len(items))
        self.batch = RunningBatch(now_s, duration_s, plan.variant.name, plan.expected_accuracy,
                                  items)
        return self.batch

    def finish(self, p50_ms: dict[tuple[str, int], float]) -> RunningBatch:
        """The running batch is done; its time against the profile feeds the slowdown."""
        batch = self.batch
        if batch is None:
            raise RuntimeError("no batch is running")
        self.batch = None
        self.slowdown.observe(p50_ms.get((batch.variant, len(batch.items))),
                              1000.0 * batch.duration_s)
        return batch

    def wake_at(self, now_s: float, wait_s: float | None) -> float | None:
        """When to decide again after an idle step on the scheduler's hint (None: the earlier
        wake-up stands, or there is nothing to wait for)."""
        if wait_s is None or not len(self.queue):
            return None
        at = now_s + max(wait_s, MIN_WAIT_S)
        if self._wake_s is not None and at >= self._wake_s:
            return None
        self._wake_s = at
        return at

    def take_wake(self, now_s: float) -> bool:
        """Whether a wake-up at `now_s` is the current one (an earlier hint supersedes)."""
        if self._wake_s is None or abs(self._wake_s - now_s) >= 1e-12:
            return False
        self._wake_s = None
        return True
