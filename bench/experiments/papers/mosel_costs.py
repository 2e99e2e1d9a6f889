"""Decision cost of MOSEL's optimized re-plan and build times of its strategy matrix
(python -m bench mosel prints them beside the simulated suite)."""

from __future__ import annotations

import random
import time
from typing import Any

from app.sim.mosel.profiles import load_profile
from app.sim.mosel.sim import build_tables
from policies.modality.api import (
    ModalityQueueSnapshot,
    QueuedJob,
    build_matrix,
    make_policy,
)
from policies.profile import LatencyModel
from policies.types import SLO, Job


def replan_cost(profile: str, num_jobs: int, trials: int, seed: int) -> dict[str, float]:
    """Optimized re-plan of `num_jobs` queued jobs with random sizes, SLOs and deadlines."""
    tables = build_tables(load_profile(profile))
    policy = make_policy("optimized", tables, random.Random(seed))
    rng = random.Random(seed)
    lo, hi = min(tables.model.accuracy), max(tables.model.accuracy)
    times: list[float] = []
    cpu: list[float] = []
    methods: dict[str, int] = {}
    for trial in range(trials + 20):
        jobs = tuple(QueuedJob(Job(i, 0.0, SLO(rng.uniform(0.2, 20.0), rng.uniform(lo, hi)),
                                   rng.randint(1, 64))) for i in range(num_jobs))
        snap = ModalityQueueSnapshot(0.0, jobs)
        t0, c0 = time.perf_counter(), time.process_time()
        plan = policy.decide(snap, 0.0)
        if trial >= 20:  # warm-up excluded
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
            methods[plan.method] = methods.get(plan.method, 0) + 1
    times.sort()
    cpu.sort()
    return {"jobs": num_jobs, "trials": trials, "p50_ms": times[len(times) // 2] * 1e3,
            "p99_ms": times[int(0.99 * len(times))] * 1e3, "max_ms": times[-1] * 1e3,
            "cpu_p50_ms": cpu[len(cpu) // 2] * 1e3, "cpu_p99_ms": cpu[int(0.99 * len(cpu))] * 1e3,
            **{f"method_{k}": v for k, v in methods.items()}}


def matrix_build_times(profile: str, gekko_sizes: int, gekko_levels: int) -> dict[str, Any]:
    model = LatencyModel.from_profile(load_profile(profile), "mean", 64)
    t0 = time.perf_counter()
    full = build_matrix(model, 64, 20, solver="exact")
    exact_full = time.perf_counter() - t0
    t0 = time.perf_counter()
    small_exact = build_matrix(model, gekko_sizes, gekko_levels, solver="exact")
    exact_small = time.perf_counter() - t0
    out: dict[str, Any] = {"profile": profile, "combinations": len(model.names),
                           "exact_64x20_s": exact_full, "exact_feasible": full.feasible_count(),
                           "small_grid": [gekko_sizes, gekko_levels], "exact_small_s": exact_small}
    try:
        t0 = time.perf_counter()
        small_gekko = build_matrix(model, gekko_sizes, gekko_levels, solver="gekko")
        out["gekko_small_s"] = time.perf_counter() - t0
        agree = 0
        for ra, rb in zip(small_exact.cells, small_gekko.cells, strict=True):
            for a, b in zip(ra, rb, strict=True):
                same = (a is None and b is None) or (
                    a is not None and b is not None and abs(a.latency_s - b.latency_s) < 1e-6)
                agree += same
        out["gekko_cells_agreeing"] = agree
        out["cells"] = gekko_sizes * gekko_levels
    except ImportError:
        out["gekko_small_s"] = None
    return out
