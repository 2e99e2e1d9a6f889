"""A replica's per-task schedulers, from its config, its profiles and the plan files the builder
resolved for it (app/builder.py: this shell never works a file name out).

A missing plan file, while the policy needs a plan it cannot build itself, leaves that task on
the config's plan-free `fallback_policy`, visibly: `TaskPolicy.fallback_reason` goes into every
report (the controller's /v1/status and `adaptserve_policy_fallback`). Anything else raises and
the replica does not start: an unreadable or invalid plan file, or a scheduler that cannot be
built from a valid config and plan (a bug).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from deployments.classifier.config import ClassifierConfig
from deployments.wire import PlanUpdate
from policies.profile import Profile
from policies.schedulers.base import Scheduler
from policies.schedulers.common import MissingPlan
from policies.schedulers.plan_types import Plan, PlanKind
from policies.schedulers.registry import make_scheduler, plan_kind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskPolicy:
    """The scheduler a task runs, the plan version it holds, and why it runs the fallback
    (None: it runs the configured policy)."""

    scheduler: Scheduler
    plan_version: str
    fallback_reason: str | None = None

    @property
    def fallback(self) -> bool:
        return self.fallback_reason is not None


def read_plan(path: Path, kind: PlanKind) -> Plan | None:
    """The plan in the file at `path`, None when there is no such file; a file that is not a
    valid plan of `kind` is a ValueError naming the file and the bad field."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return None
    try:
        return kind.read(json.loads(text))
    except ValueError as exc:  # json.JSONDecodeError is one
        raise ValueError(f"plan file {path}: {exc}") from exc


def build_task_policy(cfg: ClassifierConfig, profile: Profile, plan: Plan | None,
                      plan_path: Path | None = None) -> TaskPolicy:
    """The configured policy on `plan`, or the fallback when the policy needs a plan and has
    none (`plan_path`: where the builder looked, for the reason)."""
    try:
        scheduler = make_scheduler(cfg.policy, profile, plan, cfg.scheduler_params())
        return TaskPolicy(scheduler, "" if plan is None else plan.plan_id)
    except MissingPlan as exc:
        reason = f"no plan file {plan_path}: {exc}" if plan_path is not None else str(exc)
    log.warning("%s: %s runs %r instead of %r: %s", cfg.name, profile.name, cfg.fallback_policy,
                cfg.policy, reason)
    fallback = make_scheduler(cfg.fallback_policy, profile, None, cfg.fallback_params())
    return TaskPolicy(fallback, "fallback", reason)


def build_policies(cfg: ClassifierConfig, profiles: Mapping[str, Profile],
                   plan_paths: Mapping[str, Path]) -> dict[str, TaskPolicy]:
    """One policy per profiled task; `plan_paths` holds every task's plan file when the policy
    reads one (`registry.plan_kind`)."""
    kind = plan_kind(cfg.policy)
    out: dict[str, TaskPolicy] = {}
    for task, profile in profiles.items():
        if kind is None:
            out[task] = build_task_policy(cfg, profile, None)
            continue
        if task not in plan_paths:
            raise ValueError(f"{cfg.name}: no plan path for task {task!r} (policy {cfg.policy} "
                             f"reads {kind.value} plans)")
        path = Path(plan_paths[task])
        out[task] = build_task_policy(cfg, profile, read_plan(path, kind), path)
    return out


def apply_update(cfg: ClassifierConfig, profile: Profile, current: TaskPolicy,
                 update: PlanUpdate) -> TaskPolicy:
    """The task's policy once `update` is installed: a fallback gives way to the configured
    policy on the pushed plan; otherwise the scheduler takes the plan. A plan the scheduler
    does not run is a ValueError and changes nothing."""
    if current.fallback:
        scheduler = make_scheduler(cfg.policy, profile, update.plan, cfg.scheduler_params())
        return TaskPolicy(scheduler, update.version)
    current.scheduler.update_plan(update.plan)
    return TaskPolicy(current.scheduler, update.version)
