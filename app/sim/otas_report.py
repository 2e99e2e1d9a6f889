"""Summaries of an OTAS experiment: per-policy tallies, ratios, Algorithm 2 shortfall."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from policies.tokens import allocate_alg2, allocate_exact

if TYPE_CHECKING:
    from app.sim.otas_sim import SimRun

TOLERANCE = 1e-9


def shortfall_stats(run: SimRun) -> dict[str, Any]:
    """Re-solve every dynamic-program instance of a run with Algorithm 2 and the exact allocator
    and compare the planned (expected) utilities."""
    gaps: list[float] = []
    rel: list[float] = []
    repaired = 0
    for problem in run.problems:
        approx, exact = allocate_alg2(problem), allocate_exact(problem)
        repaired += approx.repaired_batches
        gap = exact.expected_utility - approx.expected_utility
        if gap < -TOLERANCE:
            raise AssertionError("Algorithm 2 beat the exact allocator")
        if gap > TOLERANCE:
            gaps.append(gap)
            rel.append(gap / exact.expected_utility)
    n = len(run.problems)
    rel.sort()
    return {
        "instances": n,
        "short_instances": len(gaps),
        "short_fraction": len(gaps) / n if n else 0.0,
        "mean_gap_utility": sum(gaps) / len(gaps) if gaps else 0.0,
        "max_gap_utility": max(gaps, default=0.0),
        "mean_relative_gap_when_short": sum(rel) / len(rel) if rel else 0.0,
        "max_relative_gap": rel[-1] if rel else 0.0,
        "median_relative_gap_when_short": rel[len(rel) // 2] if rel else 0.0,
        "alg2_repaired_batches": repaired,
    }


def experiment_report(config: dict[str, Any], runs: dict[str, SimRun],
                      baseline: str) -> dict[str, Any]:
    from app.sim.otas_sim import tally_run

    policies = {name: tally_run(run) for name, run in runs.items()}
    base = policies.get(baseline, {}).get("total_utility", 0.0)
    fixed = {n: p["total_utility"] for n, p in policies.items() if n.startswith("fixed")}
    best_fixed = max(fixed, key=lambda n: fixed[n]) if fixed else None
    for p in policies.values():
        p["ratio_vs_baseline"] = p["total_utility"] / base if base else None
        p["ratio_vs_best_fixed"] = (p["total_utility"] / fixed[best_fixed]
                                    if best_fixed and fixed[best_fixed] else None)
    report: dict[str, Any] = {"config": config, "baseline": baseline, "best_fixed": best_fixed,
                              "policies": policies}
    ceiling = config.get("ceiling_utility")
    if ceiling:
        report["ceiling_ratio_vs_baseline"] = ceiling / base if base else None
    report["alg2_shortfall"] = {name: shortfall_stats(run) for name, run in runs.items()
                                if name.startswith("otas-alg2") and run.problems}
    return report
