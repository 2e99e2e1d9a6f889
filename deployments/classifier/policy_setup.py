"""Build a replica's per-task schedulers from its config, profiles and plan files.

A policy that cannot be built (unknown name, plan missing or unreadable) falls back to the
config's `fallback_policy` with a warning, so a replica always serves.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deployments.classifier.config import ClassifierConfig
from policies.profile import Profile
from policies.schedulers.base import Scheduler
from policies.schedulers.registry import make_scheduler

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskPolicy:
    """The scheduler a task runs and where its plan came from."""

    scheduler: Scheduler
    plan_version: str
    fallback: bool


# scheduler name -> the plan kind it loads (profiling.plans.KINDS); absent: needs no plan file
PLAN_KIND = {"ramsis": "ramsis", "jellyfish": "jellyfish", "otas": "otas", "fixed_gamma": "otas",
             "mosel": "mosel", "all_modalities": "mosel"}


def plan_kind(policy: str) -> str | None:
    return PLAN_KIND.get(policy)


def plan_file(plans_dir: Path, model: str, task: str, policy: str) -> Path | None:
    """`<plans_dir>/<model>.<task>.<kind>.json` (profiling.plans' naming); None: no plan."""
    kind = plan_kind(policy)
    return None if kind is None else Path(plans_dir) / f"{model}.{task}.{kind}.json"


def read_plan(plans_dir: Path, model: str, task: str, policy: str) -> dict[str, Any] | None:
    path = plan_file(plans_dir, model, task, policy)
    if path is None or not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        log.warning("plan %s unreadable: %s", path, exc)
        return None
    return data if isinstance(data, dict) else None


def plan_version(plan: dict[str, Any] | None) -> str:
    if plan is None:
        return ""
    return str(plan.get("plan_id") or "file")


def build_task_policy(cfg: ClassifierConfig, profile: Profile,
                      plan: dict[str, Any] | None) -> TaskPolicy:
    params = cfg.scheduler_params()
    try:
        sched = make_scheduler(cfg.policy, profile, plan, params)
        return TaskPolicy(sched, plan_version(plan), fallback=False)
    except Exception as exc:  # unknown policy, plan missing or malformed
        log.warning("%s: policy %r unavailable for %s (%s); using %r", cfg.name, cfg.policy,
                    profile.name, exc, cfg.fallback_policy)
    fallback_params = {k: v for k, v in params.items()
                       if k in ("max_batch_size", "percentile")}
    sched = make_scheduler(cfg.fallback_policy, profile, None, fallback_params)
    return TaskPolicy(sched, "fallback", fallback=True)


def build_policies(cfg: ClassifierConfig, profiles: dict[str, Profile],
                   plans_dir: Path) -> dict[str, TaskPolicy]:
    return {task: build_task_policy(cfg, profile, read_plan(plans_dir, cfg.name, task, cfg.policy))
            for task, profile in profiles.items()}
