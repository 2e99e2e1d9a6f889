"""ModServe's static-allocation figures in the simulator (seed 001 §5.2, Figures 14, 15 and 17;
docs/sim_generation.md): 128 A100s, the monolith (32 x TP-4) against 20 text instances TP-4 +
48 image instances TP-1 as decoupled, +scheduling and +routing (= ModServe), for Llama3.2-11B
(cross-attention) and InternVL2.5-26B (decoder-only) stage profiles built from published numbers
(app/sim/generation/modserve_profiles.py). Prints a table, writes docs/data_sim_modserve.json and
docs/figures/sim_modserve.png.

    .venv/bin/python scripts/sim_modserve.py
    ... --models llama3.2-11b --requests 4000        (quicker)

P99 TTFT over a geometric grid of loads (Figure 14), the maximum load whose P99 TTFT meets the
SLO, bisected (Figure 15), and that maximum for other SLO factors read off the same grid
(Figure 17; geometric interpolation between grid points).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.sim.generation.experiment import (
    SIZED,
    SYSTEMS,
    SystemSweep,
    base_trace,
    make_setup,
    sweep,
)
from app.sim.generation.modserve_profiles import MODELS, shape_checks

ROOT = Path(__file__).resolve().parents[1]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=sorted(MODELS))
    p.add_argument("--systems", nargs="+", default=[*SYSTEMS, SIZED], choices=[*SYSTEMS, SIZED])
    p.add_argument("--slo-factor", type=float, default=10.0,
                   help="TTFT SLO = this x the isolated TTFT of a one-image request on the "
                        "monolith (§5.1)")
    p.add_argument("--sensitivity", type=float, nargs="*", default=[5.0, 7.5, 15.0, 20.0],
                   help="other SLO factors, read off the grid (Figure 17)")
    p.add_argument("--requests", type=int, default=8000, help="requests per load point")
    p.add_argument("--image-share", type=float, default=0.5, help="of requests with images")
    p.add_argument("--min-rate", type=float, default=12.5)
    p.add_argument("--points", type=int, default=17, help="grid points, x sqrt(2) apart")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--efficiency", nargs="*", default=[], metavar="FIELD=VALUE",
                   help="replace profile efficiencies (a sensitivity run), e.g. prefill_mfu=0.5")
    p.add_argument("--prefill-work-only", action="store_true",
                   help="LLM replicas count a prompt's tokens until its first token only "
                        "(the live replica: until its last)")
    p.add_argument("--json", type=Path, default=ROOT / "docs/data_sim_modserve.json")
    p.add_argument("--png", type=Path, default=ROOT / "docs/figures/sim_modserve.png")
    return p


def grid_max_load(points: list[dict[str, Any]], slo_ms: float) -> float | None:
    """The largest load meeting `slo_ms` read off a sweep's grid (None: all met it)."""
    last_ok, last_p99 = 0.0, 0.0
    for pt in points:
        rate, p99 = pt["rate_rps"], pt["ttft_p99_ms"]
        if p99 > slo_ms:
            if last_ok == 0.0 or not math.isfinite(p99):
                return last_ok
            frac = (math.log(slo_ms) - math.log(last_p99)) / (math.log(p99) - math.log(last_p99))
            return float(last_ok * (rate / last_ok) ** frac)
        last_ok, last_p99 = rate, max(p99, 1e-9)
    return None


def _point(rate: float, s: Any) -> dict[str, Any]:
    return {"rate_rps": rate, "ttft_p50_ms": s.ttft_p50_ms, "ttft_p99_ms": s.ttft_p99_ms,
            "ttft_mean_ms": s.ttft_mean_ms, "slo_attainment": s.slo_attainment,
            "tbt_p99_ms": s.tbt_p99_ms, "to_llm_p99_ms": s.to_llm_p99_ms,
            "llm_ttft_p99_ms": s.llm_ttft_p99_ms, "served_rps": s.served_rps}


def run_model(name: str, args: argparse.Namespace, rates: tuple[float, ...]) -> dict[str, Any]:
    efficiency = {k: float(v) for k, v in (e.split("=", 1) for e in args.efficiency)}
    setup = replace(make_setup(name, args.slo_factor, **efficiency),
                    prompt_tokens_until_done=not args.prefill_work_only)
    trace = base_trace(args.requests, args.image_share, args.seed)
    out: dict[str, Any] = {
        "profiles": {k: round(v, 4) for k, v in shape_checks(name, **efficiency).items()},
        "isolated_one_image_ttft_ms": setup.isolated_ttft_ms, "ttft_slo_ms": setup.ttft_slo_ms,
        "accelerators": setup.accelerators, "requests": len(trace),
        "mean_images": float(trace.num_images.mean()),
        "factors": [f"{f:g}" for f in args.sensitivity], "systems": {}}
    for system in args.systems:
        t0 = time.time()
        result: SystemSweep = sweep(setup, system, trace, rates)
        points = [_point(r, s) for r, s in result.points]
        out["systems"][system] = {
            "points": points, "max_load_rps": result.max_load_rps, "bounded": result.bounded,
            "text_image_split": list(result.split),
            "max_load_by_factor": {str(f): grid_max_load(points, f * setup.isolated_ttft_ms)
                                   for f in args.sensitivity},
            "seconds": round(time.time() - t0, 1)}
    systems = out["systems"]
    mono = systems.get("monolith", {}).get("max_load_rps")
    out["vs_monolith"] = {name: (s["max_load_rps"] / mono if mono else None)
                          for name, s in systems.items()}
    return out


def _load(value: float | None, bounded: bool, last: float) -> str:
    if value is None or not bounded:
        return f">{value if value is not None else last:.0f}"
    return f"{value:.0f}"


def table(results: dict[str, Any], slo_factor: float) -> str:
    lines = [f"SLO = {slo_factor:g} x isolated one-image TTFT on the monolith; max load = "
             "highest req/s with P99 TTFT <= SLO (0: not even at the lowest load)"]
    for name, r in results.items():
        prof = r["profiles"]
        lines.append(f"\n{name}: isolated TTFT {r['isolated_one_image_ttft_ms']:.1f} ms, SLO "
                     f"{r['ttft_slo_ms']:.1f} ms, encode share {prof['encode_share_fig5']:.2f} "
                     f"(paper {prof['encode_share_paper']:.2f}), {r['mean_images']:.2f} "
                     "images/request")
        lines.append(f"{'system':<16}{'text:image':>11}{'max req/s':>11}{'x monolith':>11}"
                     f"{'P99 low ms':>11}  max req/s at SLO factor {' '.join(r['factors'])}")
        for system, s in r["systems"].items():
            last = s["points"][-1]["rate_rps"]
            split = "32 x TP-4" if system == "monolith" else "{}:{}".format(*s["text_image_split"])
            ratio = r["vs_monolith"].get(system)
            by = " ".join(_load(v, v is not None, last) for v in s["max_load_by_factor"].values())
            lines.append(f"{system:<16}{split:>11}{_load(s['max_load_rps'], s['bounded'], last):>11}"
                         f"{'-' if ratio is None else format(ratio, '.2f'):>11}"
                         f"{s['points'][0]['ttft_p99_ms']:>11.0f}  {by}")
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(11, 3.8 * len(results)), squeeze=False)
    for row, (name, r) in zip(axes, results.items(), strict=True):
        for system, s in r["systems"].items():
            xs = [p["rate_rps"] for p in s["points"]]
            ys = [min(p["ttft_p99_ms"], 1e6) for p in s["points"]]
            row[0].plot(xs, ys, marker="o", ms=3, label=system)
        row[0].axhline(r["ttft_slo_ms"], color="k", ls="--", lw=1, label="SLO")
        row[0].set(xscale="log", yscale="log", xlabel="load (requests/s)",
                   ylabel="P99 TTFT (ms)", title=f"{name}: P99 TTFT, 128 A100s (Fig. 14)")
        row[0].set_ylim(top=20 * r["ttft_slo_ms"])
        row[0].legend(fontsize=7)
        names = list(r["systems"])
        loads = [r["systems"][n]["max_load_rps"] for n in names]
        bars = row[1].bar(names, loads, color=[f"C{i}" for i in range(len(names))])
        mono = r["systems"].get("monolith", {}).get("max_load_rps") or 0.0
        for bar, load in zip(bars, loads, strict=True):
            label = f"{load:.0f}" + (f"\n{load / mono:.1f}x" if mono else "")
            row[1].annotate(label, (bar.get_x() + bar.get_width() / 2, load), ha="center",
                            va="bottom", fontsize=8)
        row[1].set(ylabel="max requests/s at P99 TTFT <= SLO", ylim=(0, 1.2 * max(loads + [1.0])),
                   title=f"{name}: maximum load meeting the SLO (Fig. 15)")
        row[1].tick_params(axis="x", labelsize=8, labelrotation=12)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    args = _parser().parse_args()
    rates = tuple(args.min_rate * 2 ** (k / 2) for k in range(args.points))
    t0 = time.time()
    results = {name: run_model(name, args, rates) for name in args.models}
    print(table(results, args.slo_factor))
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"settings": settings, "seconds": round(time.time() - t0, 1),
                                     "models": results}, indent=1))
    plot(results, args.png)
    print(f"\nwrote {args.json} and {args.png} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
