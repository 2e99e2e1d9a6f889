"""ModelSwitching's offline step: for each anticipated load, the p99 response latency of each
static model measured by our simulator; keep the most accurate model within the SLO."""

from __future__ import annotations

import numpy as np

from app.sim.ramsis.engine import Balancer, SimConfig, Simulator
from app.sim.traces.workloads import constant_poisson
from policies.model_selection.baselines import (
    FixedPolicy,
    LoadGranularPolicy,
    StaticChoice,
    adaptive_batch_cap,
)
from policies.profile import LatencyModel


def p99_response_s(model: LatencyModel, index: int, cap: int, slo_s: float, workers: int,
                   load_qps: float, duration_s: float, seed: int) -> float:
    arrivals = constant_poisson(load_qps, duration_s, seed).arrivals_s
    config = SimConfig(workers, slo_s, Balancer.CENTRAL)
    record = Simulator(config, model, FixedPolicy("static", index, cap)).run(arrivals)
    return float(np.percentile(record.finish_s - record.arrivals_s, 99))


def model_switching(model: LatencyModel, slo_s: float, workers: int, loads_qps: list[float],
                    duration_s: float = 10.0, seed: int = 0) -> LoadGranularPolicy:
    """Most accurate model per load whose simulated p99 response latency <= SLO (else fastest)."""
    by_accuracy = sorted(range(len(model.names)), key=lambda i: -model.accuracy[i])
    choices = []
    for load in loads_qps:
        per_worker = load / workers
        chosen = StaticChoice(load, model.fastest(), adaptive_batch_cap(model, model.fastest(), slo_s, per_worker))
        for i in by_accuracy:
            cap = adaptive_batch_cap(model, i, slo_s, per_worker)
            capacity = workers * max(b / model.latency(i, b) for b in range(1, cap + 1))
            if capacity < load:
                continue  # cannot keep up: the queue grows without bound
            if p99_response_s(model, i, cap, slo_s, workers, load, duration_s, seed) <= slo_s:
                chosen = StaticChoice(load, i, cap)
                break
        choices.append(chosen)
    return LoadGranularPolicy("modelswitching", choices)
