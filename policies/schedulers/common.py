"""Helpers shared by the replica schedulers (pure)."""

from __future__ import annotations

from typing import TypeVar

from policies.profile import LatencyModel, Profile
from policies.schedulers.base import BatchPlan, Drop, DropReason, PendingItem, Scheduler
from policies.schedulers.params import CommonParams
from policies.schedulers.plan_types import Plan
from policies.types import Variant

DEFAULT_PERCENTILE = "p95"
P = TypeVar("P", bound=Plan)


class MissingPlan(ValueError):
    """The scheduler needs a plan and none was given (nor could one be built from its params).
    A deployment answers it with its fallback policy; any other error is a bug."""


def latency_model(profile: Profile, params: CommonParams) -> LatencyModel:
    """The latency model a plan-free scheduler plans with (defaults: p95, the largest profiled
    batch size)."""
    return LatencyModel.from_profile(profile, params.percentile or DEFAULT_PERCENTILE,
                                     params.max_batch_size)


def expect_plan(scheduler: Scheduler | str, plan: Plan, *types: type[P]) -> P:
    """`plan` as one of the kinds a scheduler runs, else a ValueError naming them."""
    if isinstance(plan, types):
        return plan
    name = scheduler if isinstance(scheduler, str) else scheduler.name
    raise ValueError(f"scheduler {name!r} runs {[t.KIND for t in types]} plans, "
                     f"not {plan.KIND}")


def head_task_items(pending: tuple[PendingItem, ...]) -> tuple[PendingItem, ...]:
    """Items of the most urgent item's task, in deadline order (a batch holds one task)."""
    task = pending[0].task
    return tuple(p for p in pending if p.task == task)


def drop_infeasible(pending: tuple[PendingItem, ...], now_s: float,
                    min_latency_s: float) -> tuple[tuple[Drop, ...], tuple[PendingItem, ...]]:
    """Split off items that cannot finish by their deadline even alone on the fastest option."""
    drops = tuple(Drop(p.item_id, DropReason.DEADLINE_EXCEEDED)
                  for p in pending if now_s + min_latency_s > p.deadline_s)
    if not drops:
        return (), pending
    gone = {d.item_id for d in drops}
    return drops, tuple(p for p in pending if p.item_id not in gone)


def edf_batch_size(items: tuple[PendingItem, ...], now_s: float, model: LatencyModel,
                   variant_index: int, cap: int) -> int:
    """Largest b <= cap such that the first b items (deadline order) all finish in time when run
    now as one batch on the variant; at least 1 when `items` is non-empty."""
    best, earliest = 1, float("inf")
    for b in range(1, min(cap, len(items)) + 1):
        earliest = min(earliest, items[b - 1].deadline_s)
        if now_s + model.latency(variant_index, b) <= earliest:
            best = b
        else:
            break
    return best


def plan(variant: Variant, items: tuple[PendingItem, ...], accuracy: float) -> BatchPlan:
    return BatchPlan(variant=variant, item_ids=tuple(p.item_id for p in items),
                     expected_accuracy=accuracy)
