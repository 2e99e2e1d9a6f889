"""The scheduler contract between a replica's queue and the policies (pure: no ray/torch/asyncio).

A classifier replica keeps its pending items in deadline order and, whenever its model is idle,
asks its `Scheduler` what to do next. The same scheduler objects run in the simulator, so a
scheduler never reads a clock or does I/O: `now_s` and the load estimate are passed in.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum

from policies.schedulers.plan_types import Plan
from policies.types import Variant


class DropReason(Enum):
    """Why an item is answered without a prediction."""

    DEADLINE_EXCEEDED = "deadline_exceeded"  # cannot finish before its deadline any more
    SHED = "shed"  # dropped by the policy to save others (e.g. MOSEL's violator, OTAS eviction)


@dataclass(frozen=True)
class PendingItem:
    """One queued item as the scheduler sees it (times in seconds on the caller's clock)."""

    item_id: str
    arrival_s: float
    deadline_s: float
    task: str
    utility: float = 1.0
    min_accuracy: float | None = None
    job_id: str | None = None
    job_size: int = 1


@dataclass(frozen=True)
class BatchPlan:
    """Run `item_ids` (all of one task) together on `variant`."""

    variant: Variant
    item_ids: tuple[str, ...]
    expected_accuracy: float


@dataclass(frozen=True)
class Drop:
    item_id: str
    reason: DropReason


@dataclass(frozen=True)
class SchedulerDecision:
    """What to do now: drop some items, run at most one batch, or wait.

    `wait_s` is how long to wait before asking again when nothing runs now (None: until the next
    arrival). Every item the scheduler has seen is eventually run or dropped.
    """

    drops: tuple[Drop, ...] = ()
    run: BatchPlan | None = None
    wait_s: float | None = None


class Scheduler(ABC):
    """Chooses the next batch and its variant for one replica."""

    name: str

    @abstractmethod
    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               load_qps: float) -> SchedulerDecision:
        """`pending` is non-empty and in deadline order; `load_qps` is the replica's (or the
        deployment's, per the plan's convention) recent arrival rate. Must return quickly
        (microseconds to a millisecond) and never raise for a valid queue."""

    def update_plan(self, plan: Plan) -> None:
        """Install a plan the controller pushes; the next `decide` uses it. A plan of a kind
        this scheduler does not run is a ValueError and leaves the current plan in place.
        Default: the scheduler runs no plan."""
        raise ValueError(f"scheduler {self.name!r} runs no plan (got {plan.KIND})")
