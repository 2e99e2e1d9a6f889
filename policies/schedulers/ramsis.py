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

from policies.model_selection.api import Choice
from policies.model_selection.baselines import LoadGranularPolicy
from policies.model_selection.table import PolicyTable, RamsisSelector
from policies.profile import Profile
from policies.schedulers.base import Drop, PendingItem, Scheduler, SchedulerDecision
from policies.schedulers.common import (
    MissingPlan,
    drop_infeasible,
    expect_plan,
    head_task_items,
    plan,
)
from policies.schedulers.params import (
    BuildNowParams,
    JellyfishParams,
    ModelSwitchingParams,
    RamsisParams,
)
from policies.schedulers.plan_types import LoadGranularPlan, Plan, RamsisPolicySet, RamsisTable
from policies.schedulers.plans import (
    RamsisPlanSettings,
    build_jellyfish_plan,
    build_ramsis_plan,
    load_granular_policy,
    plan_model,
)

RamsisPlan = RamsisPolicySet | RamsisTable


class _QueueScheduler(Scheduler):
    """Shared loop: optional infeasible drops, head-task queue, (variant, batch) from `_choose`."""

    def __init__(self, profile: Profile, percentile: str | None, max_batch_size: int | None,
                 params: RamsisParams | JellyfishParams | ModelSwitchingParams) -> None:
        self.name = params.scheduler
        self.profile = profile
        self.model = plan_model(profile, percentile, max_batch_size, params.percentile,
                                params.max_batch_size)
        self.max_batch_size = params.max_batch_size or self.model.max_batch_size
        self.drop_late = params.drop_infeasible
        self.load_scope = params.load_scope
        self.num_workers = 1
        self.plan_id = ""
        self._fastest_s = min(self.model.latency(i, 1) for i in range(len(self.model.names)))

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
            if not alive:
                return SchedulerDecision(drops=drops)
        items = head_task_items(alive)
        load = self.deployment_load(load_qps)
        name, b = self._choose(len(items), items[0].deadline_s - now_s, load)
        b = max(1, min(b, len(items), self.max_batch_size))
        vp = self.profile.by_name(name)
        return SchedulerDecision(drops=drops, run=plan(vp.variant, items[:b], vp.accuracy))


class RamsisScheduler(_QueueScheduler):
    """RAMSIS: the lowest-load table covering the deployment load (the highest above the
    range), then (queue length, head slack) -> (variant, batch size).

    `update_plan` takes a `RamsisPolicySet` (replaces the set and unpins) or a `RamsisTable`
    (pins that controller-selected table: load is then ignored until a set is pushed again).
    """

    def __init__(self, profile: Profile, ramsis_plan: RamsisPlan, params: RamsisParams) -> None:
        if isinstance(ramsis_plan, RamsisPolicySet):
            super().__init__(profile, ramsis_plan.percentile, ramsis_plan.max_batch_size, params)
            self.selector = RamsisSelector(list(ramsis_plan.tables))
            self.pinned: PolicyTable | None = None
        else:  # a pinned table alone (a replica that started on its fallback)
            super().__init__(profile, None, None, params)
            self.selector = RamsisSelector([ramsis_plan.table])
            self.pinned = ramsis_plan.table
        self.update_plan(ramsis_plan)

    def _check_names(self, tables: tuple[PolicyTable, ...]) -> None:
        for t in tables:
            for n in t.variant_names:
                self.profile.by_name(n)  # raises on a variant the profile lacks

    def table(self, load_qps: float) -> PolicyTable:
        return self.pinned if self.pinned is not None else self.selector.table_for(load_qps)

    def _choose(self, queue_length: int, slack_s: float, load_qps: float) -> tuple[str, int]:
        table = self.table(load_qps)
        choice: Choice = table.lookup(queue_length, slack_s)
        return table.variant_names[choice.variant_index], choice.batch_size

    def update_plan(self, plan: Plan) -> None:
        if isinstance(plan, RamsisTable):
            self._check_names((plan.table,))
            self.pinned = plan.table
        else:
            policy_set = expect_plan(self, plan, RamsisPolicySet)
            self._check_names(policy_set.tables)
            self.selector = RamsisSelector(list(policy_set.tables))
            self.pinned = None
            self.num_workers = policy_set.num_workers
        self.plan_id = plan.plan_id


class LoadGranularScheduler(_QueueScheduler):
    """Jellyfish+ / ModelSwitching: one (variant, batch cap) per anticipated load (lowest
    covering load wins); the batch is min(queue, cap). `update_plan` takes a new
    `LoadGranularPlan`."""

    def __init__(self, profile: Profile, load_plan: LoadGranularPlan,
                 params: JellyfishParams | ModelSwitchingParams) -> None:
        super().__init__(profile, load_plan.percentile, load_plan.max_batch_size, params)
        self.policy: LoadGranularPolicy = load_granular_policy(load_plan, self.model)
        self.update_plan(load_plan)

    def _choose(self, queue_length: int, slack_s: float, load_qps: float) -> tuple[str, int]:
        c = self.policy.choice_for(load_qps)
        return self.model.names[c.variant_index], min(queue_length, c.max_batch_size)

    def update_plan(self, plan: Plan) -> None:
        load_plan = expect_plan(self, plan, LoadGranularPlan)
        self.policy = load_granular_policy(load_plan, self.model)
        self.num_workers = load_plan.num_workers
        self.plan_id = plan.plan_id


def _slo_and_loads(name: str, params: BuildNowParams) -> tuple[float, int, float]:
    """(slo_s, num_workers, max_qps) for building a plan now."""
    if params.slo_s is None or params.max_qps is None:
        raise MissingPlan(f"{name} has no plan: give it one, or params slo_s and max_qps "
                          "(with num_workers, min_qps) to build one now")
    return params.slo_s, params.num_workers or 1, params.max_qps


def make_ramsis(profile: Profile, given: Plan | None, params: RamsisParams) -> Scheduler:
    """The plan, or (expensive) one built now from params slo_s/num_workers/min_qps/max_qps."""
    if given is None:
        slo_s, workers, max_qps = _slo_and_loads("ramsis", params)
        given = build_ramsis_plan(profile, RamsisPlanSettings(
            slo_s, workers, params.min_qps, max_qps,
            percentile=params.percentile or "p95", max_batch_size=params.max_batch_size,
            intervals=params.intervals))
    if not isinstance(given, RamsisPolicySet | RamsisTable):
        raise ValueError(f"scheduler 'ramsis' runs {[RamsisPolicySet.KIND, RamsisTable.KIND]} "
                         f"plans, not {given.KIND}")
    return RamsisScheduler(profile, given, params)


def make_jellyfish(profile: Profile, given: Plan | None, params: JellyfishParams) -> Scheduler:
    """The plan, or one built now (cheap) on `num_loads` loads in [min_qps, max_qps]."""
    if given is None:
        slo_s, workers, hi = _slo_and_loads("jellyfish", params)
        lo, n = params.min_qps, params.num_loads
        loads = [lo + (hi - lo) * i / (n - 1) for i in range(n)]
        given = build_jellyfish_plan(profile, slo_s, workers, loads,
                                     params.percentile or "p95", params.max_batch_size)
    return LoadGranularScheduler(profile, expect_plan("jellyfish", given, LoadGranularPlan),
                                 params)


def make_model_switching(profile: Profile, given: Plan | None,
                         params: ModelSwitchingParams) -> Scheduler:
    """Needs a `LoadGranularPlan` from the simulator calibration (app.sim.ramsis.calibration)."""
    if given is None:
        raise MissingPlan("modelswitching needs a load_granular plan: calibrate with "
                          "app.sim.ramsis.calibration.model_switching and serialize with "
                          "policies.schedulers.plans.load_granular_plan")
    return LoadGranularScheduler(profile, expect_plan("modelswitching", given, LoadGranularPlan),
                                 params)
