"""One scheduling step of a replica, the same in the live replica loop
(deployments/classifier/loop.py) and in the replica simulator (app/sim/replica/sim.py).

Whenever its model is idle a replica: answers the items whose deadline has passed (`expire`),
offers the most urgent task's items to that task's scheduler in profile time, corrected for the
replica's measured slowdown (`decide`, see slowdown.py), then answers the drops and runs the
batch the outcome names. Both drivers do only the answering and the running, so what the
simulator predicts is what the replica does. Pure: no clock, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from policies.schedulers.base import BatchPlan, Drop, PendingItem, Scheduler
from policies.schedulers.slowdown import dilate, undilate


@dataclass(frozen=True)
class Expiry:
    """The queue split at `now`: items already past their deadline, and the rest (both in
    deadline order)."""

    expired: tuple[PendingItem, ...]
    live: tuple[PendingItem, ...]


def expire(pending: tuple[PendingItem, ...], now_s: float) -> Expiry:
    """Items whose deadline is at or before `now_s` can only be answered deadline_exceeded."""
    expired = tuple(p for p in pending if p.deadline_s <= now_s)
    if not expired:
        return Expiry((), pending)
    return Expiry(expired, tuple(p for p in pending if p.deadline_s > now_s))


def most_urgent_task(pending: tuple[PendingItem, ...]) -> tuple[PendingItem, ...]:
    """The items of the task of the earliest-deadline item (a batch is one task), in deadline
    order; empty for an empty queue."""
    if not pending:
        return ()
    task = pending[0].task
    return tuple(p for p in pending if p.task == task)


@dataclass(frozen=True)
class StepInput:
    """What one scheduler is shown: its task's pending items (deadline order, non-empty), the
    replica's clock and arrival rate, and the slowdown factor of its batches against the
    profile (1.0 without latency feedback)."""

    pending: tuple[PendingItem, ...]
    now_s: float
    load_qps: float
    slowdown_factor: float = 1.0


@dataclass(frozen=True)
class StepOutcome:
    """What the replica does now.

    `drops`: offered items to answer without a prediction (each once, the scheduler's first
    reason). `run`: the batch to start, holding only offered items not dropped (None: nothing
    runs). `wait_s`: the scheduler's hint, in real time, of how long to wait before asking again
    when it neither dropped nor ran anything (None: until something changes).
    """

    drops: tuple[Drop, ...] = ()
    run: BatchPlan | None = None
    wait_s: float | None = None

    @property
    def idle(self) -> bool:
        """Nothing was dropped or started: the replica waits."""
        return self.run is None and not self.drops


def decide(scheduler: Scheduler, step: StepInput) -> StepOutcome:
    """Ask `scheduler` about `step.pending` in profile time; keep only what applies to it."""
    f = step.slowdown_factor
    seen, load = dilate(step.pending, step.now_s, step.load_qps, f)
    decision = undilate(scheduler.decide(seen, step.now_s, load), f)
    offered = {p.item_id for p in step.pending}
    drops: list[Drop] = []
    for d in decision.drops:
        if d.item_id in offered:
            offered.discard(d.item_id)
            drops.append(d)
    run = decision.run
    if run is not None:
        ids: list[str] = []
        for i in run.item_ids:
            if i in offered:
                offered.discard(i)
                ids.append(i)
        run = (None if not ids else run if tuple(ids) == run.item_ids
               else replace(run, item_ids=tuple(ids)))
    return StepOutcome(tuple(drops), run, decision.wait_s)
