"""Experiments of RAMSIS §7 in the simulator: one scenario = task x SLO x workers x trace, with
RAMSIS and the baselines side by side on the same arrivals."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.sim.ramsis.calibration import model_switching
from app.sim.ramsis.engine import Balancer, SimConfig, Simulator
from app.sim.ramsis.metrics import summarize, usage_over_time
from app.sim.ramsis.planning import plan_policy, plan_policy_set
from app.sim.traces.workloads import Workload, constant_poisson, twitter_trace
from policies.model_selection.baselines import (
    LoadGranularPolicy,
    always_fastest,
    always_most_accurate,
    jellyfish_choice,
)
from policies.model_selection.mdp_spec import LoadBalancing, MDPSpec, Reward
from policies.model_selection.table import RamsisSelector
from policies.profile import LatencyModel

log = logging.getLogger(__name__)
POLICIES = ("ramsis", "jellyfish", "modelswitching", "fastest", "most_accurate")


@dataclass(frozen=True)
class Scenario:
    slo_s: float
    workers: int
    trace: str  # "constant" or "twitter"
    qps: float = 2000.0
    duration_s: float = 30.0
    seed: int = 0
    balancer: Balancer = Balancer.ROUND_ROBIN
    reward: Reward = Reward.PER_DECISION  # what RAMSIS's value iteration maximizes
    policy_loads: tuple[float, float, float] = (200.0, 4000.0, 200.0)  # min, max, step
    policies: tuple[str, ...] = ("ramsis", "jellyfish", "modelswitching")
    cache_dir: Path | None = Path(".cache/policies")
    data_dir: Path | None = None  # the shared data directory: the twitter trace is read there
    extra: dict[str, Any] = field(default_factory=dict)

    def workload(self) -> Workload:
        if self.trace == "constant":
            return constant_poisson(self.qps, self.duration_s, self.seed)
        if self.trace == "twitter":
            if self.data_dir is None:
                raise ValueError("the twitter trace needs data_dir, the shared data directory")
            return twitter_trace(self.data_dir, int(self.duration_s), seed=self.seed)
        raise ValueError(f"unknown trace {self.trace!r}; valid: ['constant', 'twitter']")

    def loads(self) -> list[float]:
        """Anticipated loads the load-granular policies are prepared for. A constant trace gets
        exactly its load (the paper's perfect load monitor, §7.2)."""
        if self.trace == "constant":
            return [self.qps]
        lo, hi, step = self.policy_loads
        return [float(x) for x in np.arange(lo, hi + step / 2, step)]


def _ramsis(s: Scenario, model: LatencyModel, progress: bool) -> RamsisSelector:
    balancing = (LoadBalancing.SHORTEST_QUEUE if s.balancer is Balancer.SHORTEST_QUEUE
                 else LoadBalancing.ROUND_ROBIN)
    base = MDPSpec(s.slo_s, s.workers, s.qps, balancing=balancing, reward=s.reward)
    if s.trace == "constant":
        return RamsisSelector([plan_policy(base, model, s.cache_dir)])
    lo, hi, step = s.policy_loads
    return RamsisSelector(plan_policy_set(base, model, lo, hi, 2 * step, s.cache_dir,
                                          progress=progress))


def build_policy(name: str, s: Scenario, model: LatencyModel, progress: bool = False) -> Any:
    if name == "ramsis":
        return _ramsis(s, model, progress)
    if name == "jellyfish":
        return LoadGranularPolicy("jellyfish", [jellyfish_choice(model, s.slo_s, s.workers, q)
                                                for q in s.loads()])
    if name == "modelswitching":
        return model_switching(model, s.slo_s, s.workers, s.loads(), seed=s.seed)
    if name == "fastest":
        return always_fastest(model)
    if name == "most_accurate":
        return always_most_accurate(model)
    raise ValueError(f"unknown policy {name!r}; valid: {list(POLICIES)}")


def run_scenario(s: Scenario, model: LatencyModel, progress: bool = False) -> dict[str, Any]:
    """Simulate every policy of the scenario on the same arrivals; returns a JSON-able dict."""
    workload = s.workload()
    out: dict[str, Any] = {"slo_ms": s.slo_s * 1000, "workers": s.workers, "trace": s.trace,
                           "qps": s.qps if s.trace == "constant" else workload.mean_qps(),
                           "num_queries": workload.num_requests, "results": {}}
    for name in s.policies:
        policy = build_policy(name, s, model, progress)
        balancer = s.balancer if name == "ramsis" else Balancer.CENTRAL
        record = Simulator(SimConfig(s.workers, s.slo_s, balancer), model, policy).run(workload.arrivals_s)
        summary = summarize(name, record, model, s.slo_s, workload.duration_s).to_dict()
        if name == "ramsis":
            tables = policy.tables
            summary["expected_accuracy"] = float(np.mean([t.expected_accuracy for t in tables]))
            summary["expected_violation"] = float(np.mean([t.expected_violation for t in tables]))
            summary["num_policies"] = len(tables)
        summary["usage_per_second"] = usage_over_time(record, len(model.names)).tolist()
        out["results"][name] = summary
    return out
