"""RAMSIS (per-batch model selection from a solved policy set) and its load-granular baselines
(Jellyfish+, ModelSwitching) as replica schedulers.

All three keep RAMSIS's queueing model: one task's deadline-ordered queue, a batch is the
`b` most urgent items, and late queries are still served (late is better than never, RAMSIS
§4.3.1) unless the `drop_infeasible` param is set. Their tables are keyed by the deployment's
load over K replicas: with `load_scope` "replica" (default) the `load_qps` passed to `decide`
is this replica's rate and is multiplied by the plan's `num_workers`; with "deployment" it is
used as is (a controller passes the deployment's rate).
"""

from __future__ import annotations

from typing import Any

from policies.model_selection.api import Choice
from policies.model_selection.baselines import LoadGranularPolicy
from policies.model_selection.table import PolicyTable, RamsisSelector
from policies.profile import Profile
from policies.schedulers.base import (
    Drop,
    PendingItem,
    Scheduler,
    SchedulerDecision,
    SchedulerStats,
)
from policies.schedulers.common import drop_infeasible, head_task_items, plan
from policies.schedulers.plans import (
    build_jellyfish_plan,
    build_ramsis_plan,
    check_plan,
    load_load_granular,
    load_ramsis_tables,
    plan_model,
)

LOAD_SCOPES = ("replica", "deployment")


class _QueueScheduler(Scheduler):
    """Shared loop: optional infeasible drops, head-task queue, (variant, batch) from `_choose`."""

    def __init__(self, name: str, profile: Profile, plan_dict: dict[str, Any],
                 params: dict[str, Any]) -> None:
        self.name = name
        self.profile = profile
        self.model = plan_model(profile, plan_dict, params)
        self.max_batch_size = int(params.get("max_batch_size", self.model.max_batch_size))
        self.drop_late = bool(params.get("drop_infeasible", False))
        scope = str(params.get("load_scope", "replica"))
        if scope not in LOAD_SCOPES:
            raise ValueError(f"load_scope {scope!r}; valid: {list(LOAD_SCOPES)}")
        self.load_scope = scope
        self.num_workers = int(plan_dict.get("num_workers", 1))
        self.plan_id = str(plan_dict.get("plan_id", ""))
        self._fastest_s = min(self.model.latency(i, 1) for i in range(len(self.model.names)))
        self._batches = 0
        self._dropped = 0
        self._last_load = 0.0

    def deployment_load(self, load_qps: float) -> float:
        return load_qps * self.num_workers if self.load_scope == "replica" else load_qps

    def _choose(self, queue_length: int, slack_s: float, load_qps: float) -> tuple[str, int]:
        raise NotImplementedError

    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               load_qps: float) -> SchedulerDecision:
        drops: tuple[Drop, ...] = ()
        alive = pending
        if self.drop_late:
            drops, alive = drop_infeasible(pending, now_s, self._fastest_s)
            self._dropped += len(drops)
            if not alive:
                return SchedulerDecision(drops=drops)
        items = head_task_items(alive)
        self._last_load = float(self.deployment_load(load_qps))
        name, b = self._choose(len(items), items[0].deadline_s - now_s, self._last_load)
        b = max(1, min(b, len(items), self.max_batch_size))
        vp = self.profile.by_name(name)
        self._batches += 1
        return SchedulerDecision(drops=drops, run=plan(vp.variant, items[:b], vp.accuracy))

    def stats(self) -> SchedulerStats:
        return SchedulerStats(policy=self.name, plan_version=self.plan_id,
                              extra={"batches": float(self._batches),
                                     "dropped": float(self._dropped),
                                     "load_qps": self._last_load})


class RamsisScheduler(_QueueScheduler):
    """RAMSIS: the lowest-load table covering the deployment load (the highest above the
    range), then (queue length, head slack) -> (variant, batch size).

    `update_plan` takes a `ramsis_policy_set` (replaces the set and unpins) or a `ramsis_table`
    (pins that controller-selected table: load is then ignored until a set is pushed again).
    """

    def __init__(self, profile: Profile, plan_dict: dict[str, Any],
                 params: dict[str, Any] | None = None) -> None:
        params = dict(params or {})
        super().__init__("ramsis", profile, plan_dict, params)
        self.selector = RamsisSelector(load_ramsis_tables(plan_dict))
        self.pinned: PolicyTable | None = None
        self._check_names(self.selector.tables)
        self._table_load = 0.0

    def _check_names(self, tables: list[PolicyTable]) -> None:
        for t in tables:
            for n in t.variant_names:
                self.profile.by_name(n)  # raises on a variant the profile lacks

    def table(self, load_qps: float) -> PolicyTable:
        return self.pinned if self.pinned is not None else self.selector.table_for(load_qps)

    def _choose(self, queue_length: int, slack_s: float, load_qps: float) -> tuple[str, int]:
        table = self.table(load_qps)
        self._table_load = table.load_qps
        choice: Choice = table.lookup(queue_length, slack_s)
        return table.variant_names[choice.variant_index], choice.batch_size

    def update_plan(self, plan_dict: dict[str, Any]) -> None:
        tables = load_ramsis_tables(plan_dict)
        self._check_names(tables)
        if plan_dict["kind"] == "ramsis_table":
            self.pinned = tables[0]
        else:
            self.selector = RamsisSelector(tables)
            self.pinned = None
            self.num_workers = int(plan_dict.get("num_workers", self.num_workers))
        self.plan_id = str(plan_dict.get("plan_id", ""))

    def stats(self) -> SchedulerStats:
        s = super().stats()
        s.extra.update({"table_load_qps": self._table_load,
                        "pinned": float(self.pinned is not None),
                        "num_tables": float(len(self.selector.tables))})
        return s


class LoadGranularScheduler(_QueueScheduler):
    """Jellyfish+ / ModelSwitching: one (variant, batch cap) per anticipated load (lowest
    covering load wins); the batch is min(queue, cap). `update_plan` takes a new
    `load_granular` plan."""

    def __init__(self, name: str, profile: Profile, plan_dict: dict[str, Any],
                 params: dict[str, Any] | None = None) -> None:
        params = dict(params or {})
        super().__init__(name, profile, plan_dict, params)
        self.policy: LoadGranularPolicy = load_load_granular(plan_dict, self.model)

    def _choose(self, queue_length: int, slack_s: float, load_qps: float) -> tuple[str, int]:
        c = self.policy.choice_for(load_qps)
        return self.model.names[c.variant_index], min(queue_length, c.max_batch_size)

    def update_plan(self, plan_dict: dict[str, Any]) -> None:
        check_plan(plan_dict, "load_granular")
        self.policy = load_load_granular(plan_dict, self.model)
        self.num_workers = int(plan_dict.get("num_workers", self.num_workers))
        self.plan_id = str(plan_dict.get("plan_id", ""))


def _slo_and_loads(params: dict[str, Any]) -> tuple[float, float, float]:
    """(slo_s, min_qps, max_qps) for building a plan now; slo_ms is accepted for slo_s."""
    slo = params.get("slo_s")
    if slo is None and params.get("slo_ms") is not None:
        slo = float(params["slo_ms"]) / 1000.0
    if slo is None or "max_qps" not in params:
        raise ValueError("no plan given: pass a plan, or params slo_s (or slo_ms), num_workers, "
                         "min_qps, max_qps to build one now")
    return float(slo), float(params.get("min_qps", 1.0)), float(params["max_qps"])


def make_ramsis(profile: Profile, plan_dict: dict[str, Any] | None,
                params: dict[str, Any]) -> Scheduler:
    """The plan, or (expensive) one built now from params slo_s/num_workers/min_qps/max_qps."""
    if plan_dict is None:
        slo, lo, hi = _slo_and_loads(params)
        plan_dict = build_ramsis_plan(profile, slo,
                                      int(params.get("num_workers", 1)), lo, hi,
                                      percentile=str(params.get("percentile", "p95")),
                                      max_batch_size=params.get("max_batch_size"),
                                      intervals=int(params.get("intervals", 100)))
    return RamsisScheduler(profile, plan_dict, params)


def make_jellyfish(profile: Profile, plan_dict: dict[str, Any] | None,
                   params: dict[str, Any]) -> Scheduler:
    """The plan, or one built now (cheap) on `num_loads` loads in [min_qps, max_qps]."""
    if plan_dict is None:
        slo, lo, hi = _slo_and_loads(params)
        n = max(int(params.get("num_loads", 20)), 2)
        loads = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
        plan_dict = build_jellyfish_plan(profile, slo,
                                         int(params.get("num_workers", 1)), loads,
                                         str(params.get("percentile", "p95")),
                                         params.get("max_batch_size"))
    return LoadGranularScheduler("jellyfish", profile, plan_dict, params)


def make_model_switching(profile: Profile, plan_dict: dict[str, Any] | None,
                         params: dict[str, Any]) -> Scheduler:
    """Needs a `load_granular` plan from the simulator calibration (app.sim.ramsis.calibration)."""
    if plan_dict is None:
        raise ValueError("modelswitching needs a load_granular plan: calibrate with "
                         "app.sim.ramsis.calibration.model_switching and serialize with "
                         "policies.schedulers.plans.load_granular_plan")
    return LoadGranularScheduler("modelswitching", profile, plan_dict, params)
