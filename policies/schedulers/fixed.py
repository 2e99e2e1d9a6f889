"""`FixedScheduler`: always one variant, the largest EDF batch that still meets the deadlines."""

from __future__ import annotations

from typing import Any

from policies.profile import Profile
from policies.schedulers.base import PendingItem, Scheduler, SchedulerDecision, SchedulerStats
from policies.schedulers.common import (
    drop_infeasible,
    edf_batch_size,
    head_task_items,
    latency_model,
    plan,
)


class FixedScheduler(Scheduler):
    """Runs every batch on one variant.

    Items whose deadline cannot be met even by a batch of one on that variant are dropped
    (DEADLINE_EXCEEDED). Of the rest, the most urgent item's task forms the batch: the longest
    deadline-ordered prefix (up to `max_batch_size`) whose batch latency meets every deadline in
    it, at least one item. Params: `variant` (name; default most accurate), `percentile`
    (default p95), `max_batch_size` (default: largest profiled).
    """

    def __init__(self, profile: Profile, params: dict[str, Any] | None = None,
                 name: str = "fixed") -> None:
        params = dict(params or {})
        self.name = name
        self.profile = profile
        self.model = latency_model(profile, params)
        variant_name = params.get("variant")
        self.index = (self.model.most_accurate() if variant_name is None
                      else self.model.index(str(variant_name)))
        self.variant = profile.variants[self.index].variant
        self.accuracy = profile.variants[self.index].accuracy
        self.max_batch_size = self.model.max_batch_size
        self._runs = 0
        self._dropped = 0

    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               load_qps: float) -> SchedulerDecision:
        drops, alive = drop_infeasible(pending, now_s, self.model.latency(self.index, 1))
        self._dropped += len(drops)
        if not alive:
            return SchedulerDecision(drops=drops)
        items = head_task_items(alive)
        b = edf_batch_size(items, now_s, self.model, self.index, self.max_batch_size)
        self._runs += 1
        return SchedulerDecision(drops=drops, run=plan(self.variant, items[:b], self.accuracy))

    def stats(self) -> SchedulerStats:
        return SchedulerStats(policy=self.name, plan_version=self.variant.name,
                              extra={"batches": float(self._runs),
                                     "dropped": float(self._dropped)})

