"""Which plan each (deployment, task) should run at the monitored load (used by the controller).

Plans are the JSON files under `plans_dir` (see deployments.classifier.policy_setup.plan_file); a file is
re-read when its modification time changes, so offline re-planning reaches live replicas. For a
RAMSIS policy set the controller picks the table for the deployment's current load and pushes
it alone (a `ramsis_table` plan, which pins the replicas to it: RAMSIS's monitor, section
3.2.2); any other plan is pushed whole whenever its `plan_id` changes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deployments.classifier.policy_setup import plan_file, read_plan
from deployments.wire import PlanUpdate

log = logging.getLogger(__name__)


@dataclass
class _Entry:
    path: Path
    mtime: float
    plan: dict[str, Any]


class PlanBook:
    """Plans of one deployment's tasks, selected by load."""

    def __init__(self, plans_dir: Path, deployment: str, policy: str) -> None:
        self.plans_dir = Path(plans_dir)
        self.deployment = deployment
        self.policy = policy
        self._entries: dict[str, _Entry] = {}

    def _load(self, task: str) -> dict[str, Any] | None:
        path = plan_file(self.plans_dir, self.deployment, task, self.policy)
        if path is None:
            return None
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return None
        entry = self._entries.get(task)
        if entry is None or entry.mtime != mtime:
            plan = read_plan(self.plans_dir, self.deployment, task, self.policy)
            if plan is None:
                return entry.plan if entry else None
            self._entries[task] = entry = _Entry(path, mtime, plan)
        return entry.plan

    def select(self, task: str, load_qps: float) -> PlanUpdate | None:
        """The plan the replicas of this deployment should hold for `task` at `load_qps`
        (the deployment's total arrival rate); None when there is no plan file."""
        plan = self._load(task)
        if plan is None:
            return None
        if plan.get("kind") == "ramsis_policy_set":
            return _ramsis_table(task, plan, load_qps)
        return PlanUpdate(task, str(plan.get("plan_id", "file")), plan)


def _ramsis_table(task: str, plan: dict[str, Any], load_qps: float) -> PlanUpdate | None:
    from policies.model_selection.table import RamsisSelector
    from policies.schedulers.plans import load_ramsis_tables, ramsis_table_plan

    try:
        table = RamsisSelector(load_ramsis_tables(plan)).table_for(load_qps)
    except (ValueError, KeyError) as exc:
        log.warning("RAMSIS plan for %s unusable: %s", task, exc)
        return None
    pinned = ramsis_table_plan(table)
    version = f"{plan.get('plan_id', 'set')}@{table.load_qps:g}qps"
    return PlanUpdate(task, version, pinned)
