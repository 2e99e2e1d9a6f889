"""MOSEL benchmark: four policies x two profiles on the Twitter-shaped load, plus decision costs.

    .venv/bin/python scripts/bench_mosel.py --out results/mosel --seeds 0 1 2

Prints a table, writes mosel.json and mosel.png to --out.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.sim.mosel_profiles import load_profile  # noqa: E402
from app.sim.mosel_sim import build_tables, run_mosel_experiment  # noqa: E402
from policies.modality import (  # noqa: E402
    POLICY_NAMES,
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
    methods: dict[str, int] = {}
    for trial in range(trials + 20):
        jobs = tuple(QueuedJob(Job(i, 0.0, SLO(rng.uniform(0.2, 20.0), rng.uniform(lo, hi)),
                                   rng.randint(1, 64))) for i in range(num_jobs))
        snap = ModalityQueueSnapshot(0.0, jobs)
        t0 = time.perf_counter()
        plan = policy.decide(snap, 0.0)
        if trial >= 20:  # warm-up excluded
            times.append(time.perf_counter() - t0)
            methods[plan.method] = methods.get(plan.method, 0) + 1
    times.sort()
    return {"jobs": num_jobs, "trials": trials, "p50_ms": times[len(times) // 2] * 1e3,
            "p99_ms": times[int(0.99 * len(times))] * 1e3, "max_ms": times[-1] * 1e3,
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


def aggregate(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    keys = ("met_both_slos", "slo_violations", "dropped", "late", "mean_accuracy_served",
            "decision_p99_us")
    return {p: {k: statistics.fmean(r["policies"][p][k] for r in runs) for k in keys}
            for p in runs[0]["policies"]}


def print_table(profile: str, agg: dict[str, dict[str, float]], runs: list[dict[str, Any]]) -> None:
    base = agg["none"]["met_both_slos"] if "none" in agg else 0.0
    print(f"\n{profile}: {runs[0]['variants']}  capacity(all-mod)="
          f"{runs[0]['all_modality_capacity_qps']:.1f} req/s, requests/run="
          f"{statistics.fmean(r['num_requests'] for r in runs):.0f}, seeds={len(runs)}")
    print(f"{'policy':<11}{'met both':>10}{'x none':>8}{'violations':>12}{'dropped':>9}"
          f"{'late':>8}{'mean acc':>10}{'dec p99 us':>12}")
    for name, s in agg.items():
        ratio = s["met_both_slos"] / base if base else float("inf")
        print(f"{name:<11}{s['met_both_slos']:>10.0f}{ratio:>8.2f}{s['slo_violations']:>12.0f}"
              f"{s['dropped']:>9.0f}{s['late']:>8.0f}{s['mean_accuracy_served']:>10.4f}"
              f"{s['decision_p99_us']:>12.0f}")


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiles = list(results["experiments"])
    fig, axes = plt.subplots(1, len(profiles), figsize=(6 * len(profiles), 4), squeeze=False)
    for ax, prof in zip(axes[0], profiles, strict=True):
        run = results["experiments"][prof]["runs"][0]
        steps = [i * 10 for i in range(len(run["qps_steps"]))]
        ax.plot(steps, run["qps_steps"], "k--", label="offered QPS")
        for name, summary in run["policies"].items():
            good = summary["goodput_per_bucket"][: len(steps)]
            ax.plot(steps, good, label=f"{name} (acc {summary['mean_accuracy_served']:.3f})")
        ax.set_title(f"{prof}: requests/s meeting both SLOs (seed {run['seed']})")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("req/s")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=Path("results/mosel"))
    ap.add_argument("--profiles", nargs="+", default=["tvlt-like", "three-modality"],
                    help="built-in names or measured profile JSON paths")
    ap.add_argument("--profile", default=None, help="one measured profile JSON (overrides)")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--replan-jobs", type=int, default=100)
    ap.add_argument("--replan-trials", type=int, default=2000)
    ap.add_argument("--gekko-sizes", type=int, default=8)
    ap.add_argument("--gekko-levels", type=int, default=5)
    args = ap.parse_args(argv)
    profiles = [args.profile] if args.profile else args.profiles
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"experiments": {}, "replan_cost": [], "matrix_build": []}
    for prof in profiles:
        runs = [run_mosel_experiment(prof, POLICY_NAMES, seed=s, num_workers=args.workers)
                for s in args.seeds]
        agg = aggregate(runs)
        results["experiments"][prof] = {"mean_over_seeds": agg, "runs": runs}
        print_table(prof, agg, runs)
    print("\ndecision cost (optimized re-plan) and matrix build:")
    for prof in profiles:
        cost = replan_cost(prof, args.replan_jobs, args.replan_trials, seed=0)
        build = matrix_build_times(prof, args.gekko_sizes, args.gekko_levels)
        results["replan_cost"].append({"profile": prof, **cost})
        results["matrix_build"].append(build)
        print(f"  {prof}: re-plan {cost['jobs']} jobs p50 {cost['p50_ms']:.3f} ms, p99 "
              f"{cost['p99_ms']:.3f} ms over {cost['trials']} trials; matrix 64x20 exact "
              f"{build['exact_64x20_s']:.3f} s; {args.gekko_sizes}x{args.gekko_levels} grid: "
              f"exact {build['exact_small_s']:.3f} s, gekko {build.get('gekko_small_s')} s, "
              f"agreeing cells {build.get('gekko_cells_agreeing')}/{build.get('cells')}")
    (args.out / "mosel.json").write_text(json.dumps(results, indent=1))
    plot(results, args.out / "mosel.png")
    print(f"\nwrote {args.out / 'mosel.json'} and {args.out / 'mosel.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
