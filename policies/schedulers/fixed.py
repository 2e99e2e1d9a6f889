"""`FixedScheduler`: always one variant, the largest EDF batch that still meets the deadlines."""

from __future__ import annotations

from policies.profile import Profile
from policies.schedulers.base import PendingItem, Scheduler, SchedulerDecision
from policies.schedulers.common import (
    drop_infeasible,
    edf_batch_size,
    head_task_items,
    latency_model,
    plan,
)
from policies.schedulers.params import ExtremeParams, FixedParams


class FixedScheduler(Scheduler):
    """Runs every batch on one variant.

    Items whose deadline cannot be met even by a batch of one on that variant are dropped
    (DEADLINE_EXCEEDED). Of the rest, the most urgent item's task forms the batch: the longest
    deadline-ordered prefix (up to `max_batch_size`) whose batch latency meets every deadline in
    it, at least one item. `fixed` runs `params.variant` (default: the most accurate);
    `fastest` / `most_accurate` the variant their name says.
    """

    def __init__(self, profile: Profile, params: FixedParams | ExtremeParams) -> None:
        self.name = params.scheduler
        self.profile = profile
        self.model = latency_model(profile, params)
        if params.scheduler == "fastest":
            self.index = self.model.fastest()
        elif isinstance(params, FixedParams) and params.variant is not None:
            self.index = self.model.index(params.variant)
        else:
            self.index = self.model.most_accurate()
        self.variant = profile.variants[self.index].variant
        self.accuracy = profile.variants[self.index].accuracy
        self.max_batch_size = self.model.max_batch_size

    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               load_qps: float) -> SchedulerDecision:
        drops, alive = drop_infeasible(pending, now_s, self.model.latency(self.index, 1))
        if not alive:
            return SchedulerDecision(drops=drops)
        items = head_task_items(alive)
        b = edf_batch_size(items, now_s, self.model, self.index, self.max_batch_size)
        return SchedulerDecision(drops=drops, run=plan(self.variant, items[:b], self.accuracy))
