"""Summaries of an OTAS experiment: per-policy tallies, ratios, Algorithm 2 shortfall."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.sim.otas.sim import SimRun, tally_run
from policies.tokens.api import allocate_alg2, allocate_exact

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


def otas_table(report: dict[str, Any]) -> str:
    """The per-policy table printed by the CLI and python -m bench otas."""
    base, cfg = report["baseline"], report["config"]
    lines = [f"setting: {cfg.get('setting', 'paper')} (docs/otas.md)",
             f"trace: {cfg['duration_s']} s, {cfg['num_queries']} queries "
             f"(mean {cfg.get('mean_qps', 0.0):.0f} req/s, {cfg['min_qps']:.0f}-"
             f"{cfg['max_qps']:.0f}, level skew {cfg.get('level_skew')}), seed {cfg['seed']}; "
             f"profile {cfg['profile']} (serving efficiency {cfg.get('serving_efficiency')}); "
             f"rate table {cfg['rate_table']}",
             f"{'policy':<20}{'utility':>10}{'x ' + base:>10}{'x best fixed':>14}"
             f"{'type1':>8}{'type2':>8}{'type3':>8}{'type4':>8}{'DP calls':>10}"]
    for name, p in report["policies"].items():
        lines.append(f"{name:<20}{p['total_utility']:>10.1f}{p['ratio_vs_baseline']:>10.3f}"
                     f"{p['ratio_vs_best_fixed']:>14.3f}{p['type1_accurate_in_time']:>8}"
                     f"{p['type2_wrong_in_time']:>8}{p['type3_late']:>8}"
                     f"{p['type4_evicted']:>8}{p['dp_decisions']:>10}")
    lines.append(f"best fixed: {report['best_fixed']}; oracle ceiling (all in time at max "
                 f"accuracy) = {cfg['ceiling_utility']:.1f} = "
                 f"{report['ceiling_ratio_vs_baseline']:.3f}x {base}")
    for name, s in report.get("alg2_shortfall", {}).items():
        lines.append(f"Alg.2 shortfall in {name}: {s['short_instances']}/{s['instances']} DP "
                     f"instances short ({100 * s['short_fraction']:.1f}%), mean gap when short "
                     f"{100 * s['mean_relative_gap_when_short']:.2f}%, max "
                     f"{100 * s['max_relative_gap']:.2f}%")
    return "\n".join(lines)


def plot_otas(report: dict[str, Any], path: Path) -> None:
    """Total utility per policy (with the oracle ceiling) and the four outcome types."""
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
    plt.close(fig)
