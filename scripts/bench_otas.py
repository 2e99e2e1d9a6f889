"""OTAS benchmark: OTAS (Algorithm 2 and exact allocator) vs every fixed gamma on one trace,
Algorithm 2's shortfall, and the allocators' decision cost on 50 batches x 8 gammas.

    .venv/bin/python scripts/bench_otas.py --out results/otas
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from app.sim.otas_profile import figure4_profile
from app.sim.otas_sim import load_profile, run_otas_experiment
from policies.tokens import (
    AllocationProblem,
    TokenProfile,
    allocate_alg2,
    allocate_exact,
)


def random_problem(profile: TokenProfile, rng: random.Random, num_batches: int) -> AllocationProblem:
    """A heavily loaded queue: deadlines within 1 s, batches of 1..64 queries of one task."""
    deadlines = tuple(sorted(rng.uniform(0.05, 1.0) for _ in range(num_batches)))
    gammas = range(len(profile.gammas))
    latency, utility = [], []
    for _ in range(num_batches):
        size, task = rng.randint(1, 64), rng.choice(profile.tasks)
        u = rng.choice([0.01, 0.2, 0.3, 1.0])
        latency.append(tuple(profile.batch_latency_s({task: size}, g) for g in gammas))
        utility.append(tuple(profile.expected_utility({task: size * u}, g) for g in gammas))
    return AllocationProblem(0.0, deadlines, tuple(latency), tuple(utility))


def decision_cost(profile: TokenProfile, trials: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    problems = [random_problem(profile, rng, 50) for _ in range(trials)]
    out: dict[str, Any] = {"num_batches": 50, "num_gammas": len(profile.gammas), "trials": trials}
    for name, fn in (("alg2", allocate_alg2), ("exact", allocate_exact)):
        times_ms = []
        for p in problems:
            start = time.perf_counter()
            fn(p)
            times_ms.append((time.perf_counter() - start) * 1e3)
        times_ms.sort()
        out[name] = {"p50_ms": statistics.median(times_ms),
                     "p99_ms": times_ms[min(len(times_ms) - 1, int(0.99 * len(times_ms)))],
                     "max_ms": times_ms[-1]}
    gaps = []
    for p in problems:
        a, e = allocate_alg2(p).expected_utility, allocate_exact(p).expected_utility
        gaps.append((e - a) / e if e > 0 else 0.0)
    out["random_50x8_shortfall"] = {"short_fraction": sum(g > 1e-9 for g in gaps) / len(gaps),
                                    "mean_relative_gap": statistics.fmean(gaps),
                                    "max_relative_gap": max(gaps)}
    return out


def print_table(report: dict[str, Any]) -> None:
    base = report["baseline"]
    print(f"{'policy':<20}{'utility':>10}{'x ' + base:>10}{'x best fixed':>14}"
          f"{'type1':>8}{'type2':>8}{'type3':>8}{'type4':>8}{'DP calls':>10}")
    for name, p in report["policies"].items():
        print(f"{name:<20}{p['total_utility']:>10.1f}{p['ratio_vs_baseline']:>10.3f}"
              f"{p['ratio_vs_best_fixed']:>14.3f}{p['type1_accurate_in_time']:>8}"
              f"{p['type2_wrong_in_time']:>8}{p['type3_late']:>8}{p['type4_evicted']:>8}"
              f"{p['dp_decisions']:>10}")
    print(f"best fixed: {report['best_fixed']}; oracle ceiling "
          f"(all in time at max accuracy) = {report['config']['ceiling_utility']:.1f} "
          f"= {report['ceiling_ratio_vs_baseline']:.3f}x {base}")
    for name, s in report.get("alg2_shortfall", {}).items():
        print(f"Alg.2 shortfall in {name}: {s['short_instances']}/{s['instances']} DP instances "
              f"short ({100 * s['short_fraction']:.1f}%), mean gap when short "
              f"{100 * s['mean_relative_gap_when_short']:.2f}%, max {100 * s['max_relative_gap']:.2f}%")


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["policies"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    ax1.bar(names, [report["policies"][n]["total_utility"] for n in names], color="tab:blue")
    ax1.axhline(report["config"]["ceiling_utility"], color="k", ls="--", label="oracle ceiling")
    ax1.set_ylabel("total utility")
    ax1.legend()
    ax1.tick_params(axis="x", rotation=60)
    bottom = [0.0] * len(names)
    for k, label in ((1, "type1_accurate_in_time"), (2, "type2_wrong_in_time"),
                     (3, "type3_late"), (4, "type4_evicted")):
        vals = [report["policies"][n][label] / report["config"]["num_queries"] for n in names]
        ax2.bar(names, vals, bottom=bottom, label=f"type {k}")
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax2.set_ylabel("fraction of queries")
    ax2.legend(fontsize=8)
    ax2.tick_params(axis="x", rotation=60)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="results/otas", help="output directory (JSON + PNG)")
    ap.add_argument("--duration-s", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-qps", type=float, default=200.0)
    ap.add_argument("--max-qps", type=float, default=700.0)
    ap.add_argument("--profile-json", default=None, help="measured profile (policies.profile)")
    ap.add_argument("--rate-table", default="profile", choices=["profile", "paper"])
    ap.add_argument("--headroom", type=float, default=0.9)
    ap.add_argument("--trials", type=int, default=300, help="DP timing trials")
    ap.add_argument("--no-ablation", action="store_true", help="skip the *-dponly ablations")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    profile = TokenProfile.from_profile(load_profile(args.profile_json)
                                        if args.profile_json else figure4_profile())
    policies = ["otas-exact", "otas-alg2"]
    if not args.no_ablation:
        policies += ["otas-exact-dponly", "otas-alg2-dponly"]
    policies += [f"fixed{g}" for g in profile.gammas]
    report = run_otas_experiment(args.duration_s, args.seed, args.min_qps, args.max_qps,
                                 args.profile_json, policies, args.rate_table, args.headroom)
    report["decision_cost"] = decision_cost(profile, args.trials, args.seed)
    print_table(report)
    cost = report["decision_cost"]
    print(f"decision cost, 50 batches x {cost['num_gammas']} gammas ({cost['trials']} trials): "
          f"alg2 p50 {cost['alg2']['p50_ms']:.2f} ms p99 {cost['alg2']['p99_ms']:.2f} ms; "
          f"exact p50 {cost['exact']['p50_ms']:.2f} ms p99 {cost['exact']['p99_ms']:.2f} ms")
    r = cost["random_50x8_shortfall"]
    print(f"random 50x8 queues: Alg.2 short on {100 * r['short_fraction']:.0f}%, mean gap "
          f"{100 * r['mean_relative_gap']:.1f}%, max {100 * r['max_relative_gap']:.1f}%")
    (out / "otas.json").write_text(json.dumps(report, indent=2, default=str))
    plot(report, out / "otas.png")
    print(f"wrote {out / 'otas.json'} and {out / 'otas.png'}")


if __name__ == "__main__":
    main()
