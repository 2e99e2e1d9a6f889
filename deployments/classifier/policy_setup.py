"""A replica's per-task schedulers, from its config, its profiles and the plans the builder read
for it (app/builder.py reads the plan files and hands the plans in, `TaskPlan`: replicas on any
node of a cluster get them without a shared file system).

A missing plan file, while the policy needs a plan it cannot build itself, leaves that task on
the config's plan-free `fallback_policy`, visibly: `TaskPolicy.fallback_reason` goes into every
report (the controller's /v1/status and `adaptserve_policy_fallback`). Anything else raises: an
unreadable or invalid plan file (when it is read), or a scheduler that cannot be built from a
valid config and plan (a bug; the replica does not start).
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


@dataclass(frozen=True)
class TaskPlan:
    """A task's plan as the builder read it: the file it came from (named in messages) and the
    plan in it (None: no such file; the replicas run the fallback policy and say so)."""

    source: str
    plan: Plan | None


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
                      plan_source: str | None = None) -> TaskPolicy:
    """The configured policy on `plan`, or the fallback when the policy needs a plan and has
    none (`plan_source`: the file the builder looked for, for the reason)."""
    try:
        scheduler = make_scheduler(cfg.policy, profile, plan, cfg.scheduler_params())
        return TaskPolicy(scheduler, "" if plan is None else plan.plan_id)
    except MissingPlan as exc:
        reason = f"no plan file {plan_source}: {exc}" if plan_source is not None else str(exc)
    log.warning("%s: %s runs %r instead of %r: %s", cfg.name, profile.name, cfg.fallback_policy,
                cfg.policy, reason)
    fallback = make_scheduler(cfg.fallback_policy, profile, None, cfg.fallback_params())
    return TaskPolicy(fallback, "fallback", reason)


def read_task_plans(policy: str, plan_paths: Mapping[str, Path]) -> dict[str, TaskPlan]:
    """Task -> the plan `policy` reads from its file in `plan_paths` (empty when the policy reads
    none); an unreadable or invalid file is a ValueError naming it."""
    kind = plan_kind(policy)
    if kind is None:
        return {}
    return {t: TaskPlan(str(p), read_plan(Path(p), kind)) for t, p in plan_paths.items()}


def build_policies(cfg: ClassifierConfig, profiles: Mapping[str, Profile],
                   plans: Mapping[str, TaskPlan]) -> dict[str, TaskPolicy]:
    """One policy per profiled task; `plans` holds every task's plan when the policy reads one
    (`registry.plan_kind`; `read_task_plans`)."""
    kind = plan_kind(cfg.policy)
    out: dict[str, TaskPolicy] = {}
    for task, profile in profiles.items():
        if kind is None:
            out[task] = build_task_policy(cfg, profile, None)
            continue
        if task not in plans:
            raise ValueError(f"{cfg.name}: no plan for task {task!r} (policy {cfg.policy} "
                             f"reads {kind.value} plans)")
        held = plans[task]
        out[task] = build_task_policy(cfg, profile, held.plan, held.source)
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
