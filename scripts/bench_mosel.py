"""MOSEL benchmark: four policies x two profiles on the Twitter-shaped load, plus decision costs.

    .venv/bin/python scripts/bench_mosel.py --out results/mosel
    .venv/bin/python scripts/bench_mosel.py --cost-only     # re-plan decision cost only

Prints a table, writes mosel.json and mosel.png to --out.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.sim.mosel.profiles import load_profile  # noqa: E402
from app.sim.mosel.report import mosel_table, plot_mosel, run_mosel_suite  # noqa: E402
from app.sim.mosel.sim import build_tables  # noqa: E402
from policies.modality.api import (  # noqa: E402
    ModalityQueueSnapshot,
    QueuedJob,
    build_matrix,
    make_policy,
)
from policies.profile import LatencyModel  # noqa: E402
from policies.types import SLO, Job  # noqa: E402


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


def _print_cost(profile: str, cost: dict[str, float]) -> None:
    print(f"  {profile}: re-plan {cost['jobs']:.0f} jobs wall p50 {cost['p50_ms']:.3f} / p99 "
          f"{cost['p99_ms']:.3f} ms, cpu p50 {cost['cpu_p50_ms']:.3f} / p99 "
          f"{cost['cpu_p99_ms']:.3f} ms ({cost['trials']:.0f} trials)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results/mosel"))
    ap.add_argument("--profiles", nargs="+", default=["tvlt-like", "three-modality"],
                    help="built-in names or measured profile JSON paths")
    ap.add_argument("--profile", default=None, help="one measured profile JSON (overrides)")
    ap.add_argument("--seeds", nargs="+", type=int, default=list(range(10)))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--replan-jobs", nargs="+", type=int, default=[40, 100])
    ap.add_argument("--replan-trials", type=int, default=2000)
    ap.add_argument("--gekko-sizes", type=int, default=8)
    ap.add_argument("--gekko-levels", type=int, default=5)
    ap.add_argument("--cost-only", action="store_true",
                    help="only the re-plan decision cost: no suite, no matrix build, no files")
    args = ap.parse_args(argv)
    profiles = [args.profile] if args.profile else args.profiles
    if args.cost_only:
        for prof in profiles:
            for jobs in args.replan_jobs:
                _print_cost(prof, replan_cost(prof, jobs, args.replan_trials, seed=0))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    results = run_mosel_suite(profiles, args.seeds, args.workers)
    results.update({"replan_cost": [], "matrix_build": []})
    print(mosel_table(results))
    print("\ndecision cost (optimized re-plan) and matrix build:")
    for prof in profiles:
        build = matrix_build_times(prof, args.gekko_sizes, args.gekko_levels)
        results["matrix_build"].append(build)
        for jobs in args.replan_jobs:
            cost = replan_cost(prof, jobs, args.replan_trials, seed=0)
            results["replan_cost"].append({"profile": prof, **cost})
            _print_cost(prof, cost)
        print(f"  {prof}: matrix 64x20 exact {build['exact_64x20_s']:.3f} s; "
              f"{args.gekko_sizes}x{args.gekko_levels} grid: exact {build['exact_small_s']:.3f} s, "
              f"gekko {build.get('gekko_small_s')} s, agreeing cells "
              f"{build.get('gekko_cells_agreeing')}/{build.get('cells')}")
    (args.out / "mosel.json").write_text(json.dumps(results, indent=1))
    plot_mosel(results, args.out / "mosel.png")
    print(f"\nwrote {args.out / 'mosel.json'} and {args.out / 'mosel.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
