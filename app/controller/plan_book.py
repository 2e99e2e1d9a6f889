"""Which plan each (deployment, task) should run at the monitored load (used by the controller).

Plans start as the builder read them (handed in with the app, so a controller on any node of a
cluster has them). Where the controller can see the files `profiling.paths.plan_file` names for
the deployment's policy (its `registry.plan_kind`), as on a single machine, a file is re-read
when its modification time changes, so offline re-planning reaches live replicas; on a cluster,
re-planning reaches them by deploying the app again. For a RAMSIS policy set the controller picks the table for
the deployment's current load and pushes it alone (a `RamsisTable`, which pins the replicas to
it: RAMSIS's monitor, section 3.2.2); any other plan is pushed whole whenever its `plan_id`
changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from deployments.classifier.policy_setup import TaskPlan, read_plan
from deployments.wire import PlanUpdate
from policies.model_selection.table import RamsisSelector
from policies.schedulers.plan_types import Plan, RamsisPolicySet, RamsisTable
from policies.schedulers.registry import plan_kind
from profiling.paths import plan_file

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    """A plan as last read (`mtime` of its file; None: as the builder handed it in), with what
    selection derives from it."""

    mtime: float | None
    plan: Plan
    selector: RamsisSelector | None = None
    pinned: dict[float, RamsisTable] = field(default_factory=dict)  # table load -> its plan


def _entry(mtime: float | None, plan: Plan) -> _Entry:
    selector = RamsisSelector(list(plan.tables)) if isinstance(plan, RamsisPolicySet) else None
    return _Entry(mtime, plan, selector)


class PlanBook:
    """Plans of one deployment's tasks, selected by load."""

    def __init__(self, plans_dir: Path, deployment: str, policy: str,
                 plans: Mapping[str, TaskPlan] | None = None) -> None:
        """`plans`: task -> the plan the builder read (what the replicas start with)."""
        self.plans_dir = Path(plans_dir)
        self.deployment = deployment
        self.kind = plan_kind(policy)
        self._entries: dict[str, _Entry] = {
            t: _entry(None, held.plan) for t, held in (plans or {}).items()
            if held.plan is not None and self.kind is not None}

    def path(self, task: str) -> Path | None:
        """The plan file of `task` (None: the policy reads none)."""
        if self.kind is None:
            return None
        return plan_file(self.plans_dir, self.deployment, task, self.kind)

    def _load(self, task: str) -> _Entry | None:
        path = self.path(task)
        if path is None or self.kind is None:
            return None
        try:
            mtime = path.stat().st_mtime
        except OSError:  # no file here (another node): the plan handed in, if any
            return self._entries.get(task)
        entry = self._entries.get(task)
        if entry is None or entry.mtime != mtime:
            try:
                plan = read_plan(path, self.kind)
            except ValueError:  # a broken re-plan must not stop the control plane
                log.exception("plan file %s unusable; keeping the previous plan", path)
                return entry
            if plan is None:
                return entry
            self._entries[task] = entry = _entry(mtime, plan)
        return entry

    def select(self, task: str, load_qps: float) -> PlanUpdate | None:
        """The plan the replicas of this deployment should hold for `task` at `load_qps`
        (the deployment's total arrival rate); None when it has no plan."""
        entry = self._load(task)
        if entry is None:
            return None
        if entry.selector is None:
            return PlanUpdate(task, entry.plan.plan_id, entry.plan)
        table = entry.selector.table_for(load_qps)
        pinned = entry.pinned.setdefault(table.load_qps, RamsisTable(table))
        return PlanUpdate(task, f"{entry.plan.plan_id}@{table.load_qps:g}qps", pinned)
