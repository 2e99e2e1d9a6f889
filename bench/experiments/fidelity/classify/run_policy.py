"""The runs the live benchmark's simulator phase predicts (bench/experiments/fidelity/classify/live_runs.py), in the order
the live runs came, and the policy each deploys: its classifier config and plan file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.sim.traces.spec import TraceSpec
from bench.experiments.adaptive_vs_static.family import FamilySetup
from policies.profile import Profile

if TYPE_CHECKING:
    from deployments.classifier.config import ClassifierConfig
    from policies.schedulers.plan_types import Plan


@dataclass(frozen=True)
class RunPolicy:
    """The scheduler config a predicted run deploys and the plan file its replicas read."""

    classifier: ClassifierConfig
    plan: Plan | None

    def scheduler(self, profile: Profile) -> Any:
        from deployments.classifier.policy_setup import build_task_policy

        return build_task_policy(self.classifier, profile, self.plan).scheduler


def run_policy(args: dict[str, Any], setup: FamilySetup, family: str) -> RunPolicy:
    """The policy of the app `args` for `family`."""
    from app.builder import ensure_artifacts, load_config, task_plan

    run_cfg = load_config(args)
    # the plan file must be this config's (a no-op right after the live runs; --resim may
    # follow other deployments that rewrote it)
    ensure_artifacts(run_cfg)
    c = run_cfg.classifier(family)
    return RunPolicy(c, task_plan(c, setup.cfg.paths, setup.task))


@dataclass(frozen=True)
class Predicted:
    name: str
    args: dict[str, Any]
    spec: TraceSpec
