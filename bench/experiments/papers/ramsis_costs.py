"""RAMSIS costs (python -m bench ramsis-costs): policy generation time against the number of
models (the paper's synthetic interpolated models), online lookup latency, simulator speed."""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np

from app.sim.ramsis.engine import Balancer, SimConfig, Simulator
from app.sim.traces.workloads import twitter_trace
from policies.model_selection.api import WorkerView
from policies.model_selection.mdp import build_mdp
from policies.model_selection.mdp_spec import MDPSpec
from policies.model_selection.solve import solve
from policies.model_selection.table import PolicyTable, RamsisSelector
from policies.profile import LatencyModel


def interpolated_models(base: LatencyModel, count: int) -> LatencyModel:
    """The paper's synthetic set (§7.3.2): linear interpolation along the Pareto front of the base
    models, spread evenly in accuracy, a strict superset of the base models."""
    order = sorted(range(len(base.names)), key=lambda i: base.accuracy[i])
    acc = np.array([base.accuracy[i] for i in order])
    lat = np.array([base.latency_s[i] for i in order])
    extra = np.linspace(acc[0], acc[-1], count - len(order) + 2)[1:-1]
    names, accs, tables = [base.names[i] for i in order], list(acc), [tuple(r) for r in lat]
    for k, a in enumerate(extra):
        i = int(np.clip(np.searchsorted(acc, a) - 1, 0, len(acc) - 2))
        w = (a - acc[i]) / (acc[i + 1] - acc[i])
        names.append(f"synthetic_{k}")
        accs.append(float(a))
        tables.append(tuple((1 - w) * lat[i] + w * lat[i + 1]))
    idx = sorted(range(len(names)), key=lambda i: accs[i])
    return LatencyModel(tuple(names[i] for i in idx), tuple(accs[i] for i in idx),
                        tuple(tables[i] for i in idx), base.max_batch_size)


def time_generation(model: LatencyModel, spec: MDPSpec) -> dict[str, float]:
    c0, w0 = time.process_time(), time.perf_counter()
    mdp = build_mdp(spec, model)
    c1 = time.process_time()
    solved = solve(mdp)
    c2, w2 = time.process_time(), time.perf_counter()
    return {"models": len(model.names), "states": mdp.space.size, "rows": mdp.num_rows,
            "build_cpu_s": c1 - c0, "solve_cpu_s": c2 - c1, "total_cpu_s": c2 - c0,
            "total_wall_s": w2 - w0, "expected_accuracy": solved.expected_accuracy}


def time_lookup(table: PolicyTable, calls: int = 200_000) -> dict[str, float]:
    sel = RamsisSelector([table])
    rng = random.Random(0)
    views = [WorkerView(0, rng.randint(1, 40), rng.uniform(-0.01, 0.15), 2000.0, 0.0)
             for _ in range(1000)]
    samples = np.empty(calls)
    clock = time.perf_counter_ns
    for i in range(calls):
        v = views[i % 1000]
        t0 = clock()
        sel.choose(v)
        samples[i] = clock() - t0
    return {"calls": calls, "p50_us": float(np.percentile(samples, 50) / 1e3),
            "p99_us": float(np.percentile(samples, 99) / 1e3)}


def time_simulator(table_loader: RamsisSelector, model: LatencyModel, duration_s: int,
                   data_dir: Path) -> dict[str, float]:
    """100 workers on the Twitter trace (read from `data_dir`, the shared data directory)."""
    w = twitter_trace(data_dir, duration_s, seed=0)
    t0 = time.perf_counter()
    Simulator(SimConfig(100, 0.15, Balancer.ROUND_ROBIN), model, table_loader).run(w.arrivals_s)
    wall = time.perf_counter() - t0
    return {"workers": 100, "queries": w.num_requests, "wall_s": wall, "queries_per_wall_s": w.num_requests / wall}
