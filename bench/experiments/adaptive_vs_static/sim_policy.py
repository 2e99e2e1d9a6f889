"""The runs the live benchmark's simulator phase predicts (bench/experiments/adaptive_vs_static/sim.py), in the order
the live runs came, and the policy each deploys: its classifier config and plan file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.sim.traces.spec import TraceSpec
from bench.experiments.adaptive_vs_static.family import FamilySetup
from policies.profile import Profile

if TYPE_CHECKING:
    from bench.experiments.adaptive_vs_static.settings import LiveBenchSettings
    from bench.experiments.adaptive_vs_static.sim import SimPhaseInputs
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


def predicted_runs(settings: LiveBenchSettings, inputs: SimPhaseInputs) -> list[Predicted]:
    """The runs the simulator predicts: the static ones at 2x, the adaptive ones at 1x, 2x."""
    adaptive = settings.policy
    out = [Predicted("static_2x", inputs.configs.static_args, inputs.spec_2x),
           *(Predicted(name, args, inputs.spec_2x) for name, args in inputs.others.items()),
           Predicted(f"{adaptive}_2x", inputs.configs.adapt_args, inputs.spec_2x)]
    if inputs.spec_1x is not None and f"{adaptive}_1x" in inputs.runs:
        out.insert(-1, Predicted(f"{adaptive}_1x", inputs.configs.adapt_args, inputs.spec_1x))
    return out


WARMUP = "warmup_adaptive"


def in_live_order(settings: LiveBenchSettings, inputs: SimPhaseInputs,
                  predicted: list[Predicted]) -> list[Predicted]:
    """The predicted runs with the adaptive warm-up before the first adaptive run, as live
    (bench/experiments/adaptive_vs_static/phases.py `_at_2x`: at the capacity, poisson, seed + 1)."""
    if WARMUP not in inputs.runs:
        return predicted
    warm = Predicted(WARMUP, inputs.configs.adapt_args,
                     TraceSpec("poisson", inputs.spec_2x.qps / 2, settings.warmup_s,
                               seed=settings.seed + 1))
    first = next((i for i, p in enumerate(predicted) if p.name.startswith(f"{settings.policy}_")),
                 len(predicted))
    return [*predicted[:first], warm, *predicted[first:]]
