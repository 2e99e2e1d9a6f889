"""python -m bench fidelity generation: the fidelity table, figure and summary."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from bench.experiments.fidelity.generation.fit import ABLATION, HEADLINE

log = logging.getLogger(__name__)


def _ms(x: float | None) -> str:
    if x is None:
        return "-"
    return "inf" if x == float("inf") else f"{x:.0f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.0f}"


def table(runs: list[dict[str, Any]]) -> str:
    lines = []
    for run in runs:
        lines.append(f"\n{run['json']} (commit {run['commit']}; records {run['records']}); "
                     f"workload rebuilt from its settings = its records: "
                     f"{run['workload_rebuilt'] or 'not checked'}")
        for system, c in run["calibration"].items():
            pc = c["path_costs"]
            lines.append(f"  {system}: calibrated at {c['calibration_rate_rps']:g} req/s: "
                         f"path {pc['fixed_ms']:.1f} ms + {pc['per_hop_ms']:.1f} ms/image hop + "
                         f"{pc['per_image_ms']:.2f} ms/image; CPU {pc['cpu_share']:.2f} "
                         f"s/s of it on {pc['host_cores']:.0f} cores beside "
                         f"{pc['competitors']:.2f} busy (CPU from {c['cpu_terms_from']})")
        lines.append(f"  {'system':19} {'req/s':>5} {'live P50':>8} {'live P99':>8} "
                     f"{'(P99 5-95%)':>13} {'stages':>6} {'+path':>6} {'sim P50':>7} "
                     f"{'sim P99':>7} {'err %':>6} {'+spread':>7} {'err %':>6} {'shared':>7} "
                     f"{'err %':>6}  verdict")
        for r in run["rows"]:
            lv, sim = r["live"], r["sim"]
            best = sim[HEADLINE(sim)]
            spread = "/".join(_ms(x) for x in lv["ttft_p99_spread_ms"])
            lines.append(
                f"  {r['system']:19} {r['rate_rps']:5g} {_ms(lv['ttft_p50_ms']):>8} "
                f"{_ms(lv['ttft_p99_ms']):>8} {spread:>13} "
                f"{_ms(sim['stages']['ttft_p99_ms']):>6} {_ms(sim['path']['ttft_p99_ms']):>6} "
                f"{_ms(best['ttft_p50_ms']):>7} {_ms(best['ttft_p99_ms']):>7} "
                f"{_pct(r['p99_error_pct']):>6} "
                f"{_ms(sim[HEADLINE(sim) + '+spread']['ttft_p99_ms']):>7} "
                f"{_pct(r['p99_error_pct_spread']):>6} "
                f"{_ms(sim.get('shared', {}).get('ttft_p99_ms')):>7} "
                f"{_pct(r.get('p99_error_pct_shared')):>6}  "
                f"{'(calibration) ' if r['calibration'] else ''}{r['verdict']} | "
                f"+spread: {r['verdict_spread']} | shared: {r.get('verdict_shared', '-')}")
    return "\n".join(lines)


def plot(runs: list[dict[str, Any]], burst: dict[str, Any] | None, demo: dict[str, Any] | None,
         path: Path) -> None:
    from bench.core.plot import pyplot, save

    plt = pyplot()

    systems = list(ABLATION)
    fig, grid = plt.subplots(2, 3, figsize=(13, 7.5))
    axes = grid.ravel()
    cap = 1000.0
    for ax, system in zip(axes, systems, strict=False):
        for k, run in enumerate(runs):
            rows = [r for r in run["rows"] if r["system"] == system]
            if not rows:
                continue
            x = [r["rate_rps"] for r in rows]
            tag = Path(run["json"]).stem.replace("data_", "")
            ax.plot(x, [min(cap, r["live"]["ttft_p99_ms"]) for r in rows], "o", color=f"C{k}",
                    label=f"live ({tag})")
            ax.plot(x, [min(cap, r["sim"][HEADLINE(r["sim"])]["ttft_p99_ms"])
                        for r in rows], "-", color=f"C{k}", label=f"sim ({tag})")
            ax.plot(x, [min(cap, r["sim"][HEADLINE(r["sim"]) + "+spread"]["ttft_p99_ms"])
                        for r in rows], "--", color=f"C{k}",
                    label="sim + residual spread" if k == 0 else None)
            ax.plot(x, [min(cap, r["sim"]["path"]["ttft_p99_ms"]) for r in rows], ":",
                    color=f"C{k}", label="sim, no CPU contention" if k == 0 else None)
        ax.axhline(250, color="0.6", lw=0.8, ls="--")
        ax.set_title(system, fontsize=9)
        ax.set_xlabel("req/s")
        ax.set_ylim(0, cap * 1.05)
        ax.set_ylabel(f"P99 TTFT ms ({cap:g}: >1% no first token)", fontsize=8)
    axes[0].legend(fontsize=7)
    if burst and demo:
        ax = axes[len(systems)]
        t = [r["t_s"] for r in demo["series"]]
        ax.step(t, [r["encoder"]["running"] for r in demo["series"]], where="post",
                label="live encoders running")
        ax.step(t, [r["encoder"]["running"] for r in burst["sim_series"]], where="post",
                ls="--", label="sim encoders running")
        ax.step(t, [r["llm"]["running"] for r in demo["series"]], where="post", lw=3,
                alpha=0.4, label="live LLM running")
        ax.step(t, [r["llm"]["running"] for r in burst["sim_series"]], where="post", ls=":",
                label="sim LLM running")
        ax.set_title("burst demo: replicas over time", fontsize=9)
        ax.set_xlabel("s")
        ax.legend(fontsize=7)
    for ax in axes[len(systems) + (1 if burst else 0):]:
        ax.axis("off")
    save(fig, path, dpi=110)


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [r for run in runs for r in run["rows"] if not r["calibration"]]
    out: dict[str, Any] = {"predicted_rows": len(rows)}
    for key in ("verdict", "verdict_spread", "verdict_shared"):
        counts: dict[str, int] = {}
        for r in rows:
            counts[r.get(key, "-")] = counts.get(r.get(key, "-"), 0) + 1
        out["by_" + key] = counts
    return out


def run_to_run(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same system and load in two live runs: their P99s (the live figure's own spread)."""
    seen: dict[tuple[str, float], list[tuple[str, float]]] = {}
    for run in runs:
        for row in run["rows"]:
            seen.setdefault((row["system"], row["rate_rps"]), []).append(
                (run["json"], row["live"]["ttft_p99_ms"]))
    out = []
    for (system, rate), xs in seen.items():
        if len(xs) > 1:
            finite = [x for _, x in xs if x != float("inf")]
            ratio = max(finite) / min(finite) if len(finite) == len(xs) else None
            out.append({"system": system, "rate_rps": rate, "live_p99_ms": dict(xs),
                        "max_over_min": ratio})
    return out


# ---- the burst demo replayed ------------------------------------------------------------------
