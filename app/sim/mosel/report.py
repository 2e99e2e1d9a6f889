"""MOSEL experiment over several profiles and seeds: aggregation, table, plot.

`run_mosel_suite` is what both `python -m bench mosel` and
`python -m bench mosel` run; `mosel_table` and `plot_mosel` render its result.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.sim.mosel.sim import run_mosel_experiment
from policies.modality.api import ABLATION_NAMES, POLICY_NAMES

DEFAULT_PROFILES = ("tvlt-like", "three-modality")
SUITE_POLICIES = (*POLICY_NAMES, *ABLATION_NAMES)
_KEYS = ("met_both_slos", "slo_violations", "dropped", "late", "mean_accuracy_served",
         "decision_p50_us", "decision_p99_us")


def aggregate(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per policy: means over seeds, and on how many seeds `optimized` had fewer violations."""
    out = {p: {k: statistics.fmean(r["policies"][p][k] for r in runs) for k in _KEYS}
           for p in runs[0]["policies"]}
    for p in out:
        for cause in runs[0]["policies"][p]["dropped_by_cause"]:
            out[p][f"dropped_{cause}"] = statistics.fmean(
                r["policies"][p]["dropped_by_cause"][cause] for r in runs)
    for p in out:
        if p != "optimized" and "optimized" in out:
            out[p]["seeds_optimized_fewer_violations"] = sum(
                r["policies"]["optimized"]["slo_violations"] < r["policies"][p]["slo_violations"]
                for r in runs)
    return out


def run_mosel_suite(profiles: Sequence[str] = DEFAULT_PROFILES,
                    seeds: Sequence[int] = tuple(range(10)), num_workers: int = 1,
                    policies: Sequence[str] = SUITE_POLICIES, *,
                    data_dir: Path, setting: str = "served") -> dict[str, Any]:
    """Every profile (built-in name or profile JSON path) x seed x policy, plus the means;
    `data_dir` is the shared data directory (the Twitter trace); `setting` as in
    `run_mosel_experiment` ("served" or "paper")."""
    experiments: dict[str, Any] = {}
    for prof in profiles:
        runs = [run_mosel_experiment(prof, tuple(policies), seed=s, num_workers=num_workers,
                                     data_dir=data_dir, setting=setting)
                for s in seeds]
        experiments[prof] = {"mean_over_seeds": aggregate(runs), "runs": runs}
    return {"seeds": list(seeds), "num_workers": num_workers, "setting": setting,
            "experiments": experiments}


def mosel_table(suite: dict[str, Any]) -> str:
    lines = [f"setting: {suite.get('setting', 'paper')} (docs/mosel.md)"]
    for prof, exp in suite["experiments"].items():
        agg, runs = exp["mean_over_seeds"], exp["runs"]
        base = agg["none"]["met_both_slos"] if "none" in agg else 0.0
        lines.append(f"\n{prof}: {runs[0]['variants']}  capacity(all-mod)="
                     f"{runs[0]['all_modality_capacity_qps']:.1f} req/s, requests/run="
                     f"{statistics.fmean(r['num_requests'] for r in runs):.0f}, "
                     f"seeds={len(runs)}")
        lines.append(f"{'policy':<24}{'met both':>9}{'x none':>8}{'violations':>11}"
                     f"{'dropped':>9}{'late':>7}{'mean acc':>10}{'dec p99 us':>11}"
                     f"{'opt fewer':>10}")
        for name, s in agg.items():
            ratio = s["met_both_slos"] / base if base else float("inf")
            fewer = s.get("seeds_optimized_fewer_violations")
            lines.append(f"{name:<24}{s['met_both_slos']:>9.0f}{ratio:>8.2f}"
                         f"{s['slo_violations']:>11.0f}{s['dropped']:>9.0f}{s['late']:>7.0f}"
                         f"{s['mean_accuracy_served']:>10.4f}{s['decision_p99_us']:>11.0f}"
                         f"{'' if fewer is None else f'{fewer:.0f}/{len(runs)}':>10}")
        names = list(runs[0]["policies"][next(iter(agg))]["dropped_by_cause"])
        causes = ", ".join(f"{n} " + "/".join(f"{s[f'dropped_{c}']:.0f}" for c in names)
                           for n, s in agg.items() if s["dropped"])
        lines.append(f"dropped requests {'/'.join(names)}: {causes}")
    lines.append("(means over seeds; violations = dropped + late requests; mean acc over served "
                 "requests; 'opt fewer' = seeds on which optimized had fewer violations; drops: "
                 "blocked = misses even alone on its fastest strategy once the worker frees up, "
                 "at-arrival / later = would fit alone, dropped on arrival / at a later re-plan"
                 + ("; expired = its deadline passed while it waited (served setting)"
                    if suite.get("setting") == "served" else "") + ")")
    return "\n".join(lines)


def plot_mosel(report: dict[str, Any], path: Path) -> None:
    """Goodput over time (first seed) and violations per policy (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiles = list(report["experiments"])
    fig, axes = plt.subplots(2, len(profiles), figsize=(6.5 * len(profiles), 8), squeeze=False)
    for col, prof in enumerate(profiles):
        exp = report["experiments"][prof]
        run, agg = exp["runs"][0], exp["mean_over_seeds"]
        ax = axes[0][col]
        steps = [i * 10 for i in range(len(run["qps_steps"]))]
        ax.plot(steps, run["qps_steps"], "k--", label="offered req/s")
        for name, summary in run["policies"].items():
            ax.plot(steps, summary["goodput_per_bucket"][: len(steps)], label=name)
        ax.set_title(f"{prof}: req/s meeting both SLOs (seed {run['seed']})")
        ax.set_xlabel("time (s)")
        ax.legend(fontsize=7)
        ax = axes[1][col]
        names = [n for n in agg if n != "none"]  # 'none' is off the scale (see the table)
        vals = [agg[n]["slo_violations"] for n in names]
        ax.bar(names, vals, color="tab:red")
        for i, n in enumerate(names):
            ax.annotate(f"acc {agg[n]['mean_accuracy_served']:.3f}", (i, vals[i]),
                        ha="center", va="bottom", fontsize=8)
        ax.set_ylim(0, max(vals, default=1.0) * 1.15)
        ax.set_title(f"{prof}: SLO-violating requests, mean of {len(exp['runs'])} seeds")
        ax.tick_params(axis="x", rotation=30, labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
