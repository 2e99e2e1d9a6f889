"""ModServe's static-allocation figures in the simulator (seed 001 §5.2, Figures 14, 15 and 17;
docs/sim_generation.md): 128 A100s, the monolith (32 x TP-4) against 20 text instances TP-4 +
48 image instances TP-1 as decoupled, +scheduling and +routing (= ModServe), for Llama3.2-11B
(cross-attention) and InternVL2.5-26B (decoder-only) stage profiles built from published numbers
(app/sim/generation/modserve_profiles.py). Prints a table, writes docs/data_sim_modserve.json and
docs/figures/sim_modserve.png.

    .venv/bin/python -m bench modserve
    ... --models llama3.2-11b --requests 4000        (quicker)

P99 TTFT per request class over a geometric grid of loads (Figure 14), the maximum load whose
P99 TTFT meets the SLOs (each class within its own: §5.1 defines a text-only and a one-image
SLO), bisected (Figure 15), and that maximum for other SLO factors read off the same grid
(Figure 17; geometric interpolation between grid points).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from app.sim.generation.experiment import (
    ATTAINMENT_TARGET,
    CRITERIA,
    SIZED,
    SYSTEMS,
    SystemSweep,
    base_trace,
    make_setup,
    sweep,
)
from app.sim.generation.modserve_profiles import MODELS, shape_checks
from bench.core.cli import experiment_parser, settings_of
from bench.core.paths import REPO as ROOT
from bench.core.result import Run

MIN_RATE = {"llama3.2-11b": 12.5, "internvl2.5-26b": 2.5}  # ~5% of the monolith's capacity


def _parser() -> argparse.ArgumentParser:
    p = experiment_parser(__doc__, out=ROOT / "docs/data_sim_modserve.json", seed=1)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=sorted(MODELS))
    p.add_argument("--systems", nargs="+", default=[*SYSTEMS, SIZED], choices=[*SYSTEMS, SIZED])
    p.add_argument("--slo-factor", type=float, default=10.0,
                   help="TTFT SLOs = this x the isolated TTFT on the monolith of a text-only "
                        "request (text-only requests) and a one-image request (the others; §5.1)")
    p.add_argument("--sensitivity", type=float, nargs="*", default=[5.0, 7.5, 15.0, 20.0],
                   help="other SLO factors, read off the grid (Figure 17)")
    p.add_argument("--requests", type=int, default=8000, help="requests per load point")
    p.add_argument("--image-share", type=float, default=0.5, help="of requests with images")
    p.add_argument("--images-exponent", type=float, default=2.0,
                   help="images per image-text request ~ n^-this on 1..16 (mean 2.13 at 2)")
    p.add_argument("--min-rate", type=float, default=None,
                   help=f"the grid's lowest load, req/s (default per model: {MIN_RATE})")
    p.add_argument("--points", type=int, default=17, help="grid points, x sqrt(2) apart")
    p.add_argument("--efficiency", nargs="*", default=[], metavar="FIELD=VALUE",
                   help="replace profile efficiencies (a sensitivity run), e.g. prefill_mfu=0.5")
    p.add_argument("--hold-until-done", action="store_true",
                   help="LLM replicas count a prompt's tokens until its last token (the first "
                        "cut; default: until its first token, the prefill work)")
    p.add_argument("--no-chunked-prefill", action="store_true",
                   help="LLM replicas prefill a prompt whole in one iteration (the first model; "
                        "default: vLLM V1's chunked prefill)")
    p.add_argument("--one-slo", action="store_true",
                   help="the one-image SLO for every request (the first cut; default: per class)")
    p.add_argument("--tiles", type=int, default=None,
                   help="image tiles per image (default: the model's; Fig. 5 re-calibrated)")
    p.add_argument("--png", type=Path, default=ROOT / "docs/figures/sim_modserve.png")
    return p


def grid_max_load(points: list[dict[str, Any]], factor: float) -> float | None:
    """The largest load meeting the SLOs at SLO factor `factor` (the worst class's P99 TTFT /
    its isolated TTFT within `factor`), read off a sweep's grid (None: all met it)."""
    last_ok, last = 0.0, 0.0
    for pt in points:
        rate, ratio = pt["rate_rps"], pt["p99_over_isolated"]
        if ratio > factor:
            if last_ok == 0.0 or not math.isfinite(ratio):
                return last_ok
            frac = (math.log(factor) - math.log(last)) / (math.log(ratio) - math.log(last))
            return float(last_ok * (rate / last_ok) ** frac)
        last_ok, last = rate, max(ratio, 1e-9)
    return None


def _point(rate: float, s: Any, slo_factor: float) -> dict[str, Any]:
    return {"rate_rps": rate, "ttft_p50_ms": s.ttft_p50_ms, "ttft_p99_ms": s.ttft_p99_ms,
            "ttft_p99_text_ms": s.ttft_p99_text_ms, "ttft_p99_image_ms": s.ttft_p99_image_ms,
            "meets_slo": s.meets_slo, "p99_over_isolated": s.slo_ratio * slo_factor,
            "ttft_mean_ms": s.ttft_mean_ms, "slo_attainment": s.slo_attainment,
            "tbt_p99_ms": s.tbt_p99_ms, "to_llm_p99_ms": s.to_llm_p99_ms,
            "llm_ttft_p99_ms": s.llm_ttft_p99_ms, "served_rps": s.served_rps}


def run_model(name: str, args: argparse.Namespace) -> dict[str, Any]:
    low = args.min_rate if args.min_rate is not None else MIN_RATE[name]
    rates = tuple(low * 2 ** (k / 2) for k in range(args.points))
    efficiency = {k: float(v) for k, v in (e.split("=", 1) for e in args.efficiency)}
    setup = replace(make_setup(name, args.slo_factor, not args.one_slo, args.tiles, **efficiency),
                    prompt_tokens_until_done=args.hold_until_done,
                    chunked_prefill=not args.no_chunked_prefill)
    trace = base_trace(args.requests, args.image_share, args.seed, args.images_exponent)
    out: dict[str, Any] = {
        "profiles": {k: round(v, 4) for k, v in shape_checks(name, args.tiles,
                                                             **efficiency).items()},
        "tokens_per_image": setup.disaggregated.encoder.tokens_per_image,
        "isolated_one_image_ttft_ms": setup.isolated_ttft_ms, "ttft_slo_ms": setup.ttft_slo_ms,
        "isolated_text_only_ttft_ms": setup.isolated_text_ttft_ms,
        "text_ttft_slo_ms": setup.slos.slo_ms(0),
        "accelerators": setup.accelerators, "requests": len(trace),
        "mean_images": float(trace.num_images.mean()),
        "p99_images_per_image_request": float(np.quantile(
            trace.num_images[trace.num_images > 0], 0.99, method="inverted_cdf")),
        "factors": [f"{f:g}" for f in args.sensitivity], "systems": {}}
    for system in args.systems:
        t0 = time.time()
        result: SystemSweep = sweep(setup, system, trace, rates, refine_steps=4)
        points = [_point(r, s, setup.slo_factor) for r, s in result.points]
        out["systems"][system] = {
            "points": points, "max_load_rps": result.max_load_rps, "bounded": result.bounded,
            "text_image_split": list(result.split),
            "max_load_by_factor": {str(f): grid_max_load(points, f) for f in args.sensitivity},
            "seconds": round(time.time() - t0, 1)}
    systems = out["systems"]
    out["vs_monolith"] = {}
    for crit in CRITERIA:
        mono = systems.get("monolith", {}).get("max_load_rps", {}).get(crit)
        out["vs_monolith"][crit] = {name: (s["max_load_rps"][crit] / mono if mono else None)
                                    for name, s in systems.items()}
    return out


def _load(value: float | None, bounded: bool, last: float) -> str:
    if value is None or not bounded:
        return f">{value if value is not None else last:.0f}"
    return f"{value:.0f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(results: dict[str, Any], slo_factor: float) -> str:
    lines = [f"SLOs = {slo_factor:g} x isolated TTFT on the monolith, per class (text-only; one "
             "image). Max load, req/s: 'p99' = each class's P99 TTFT within its SLO; 'attain' "
             f"= at least {ATTAINMENT_TARGET:.0%} of requests within their class's SLO "
             "(0: not even at the lowest load; x mono '-': the monolith's is 0)"]
    for name, r in results.items():
        prof = r["profiles"]
        lines.append(f"\n{name}: {r['tokens_per_image']} tokens/image, isolated TTFT text-only "
                     f"{r['isolated_text_only_ttft_ms']:.1f} ms / one image "
                     f"{r['isolated_one_image_ttft_ms']:.1f} ms, SLOs {r['text_ttft_slo_ms']:.0f}"
                     f" / {r['ttft_slo_ms']:.0f} ms, encode share {prof['encode_share_fig5']:.2f} "
                     f"(paper {prof['encode_share_paper']:.2f}), {r['mean_images']:.2f} "
                     f"images/request (P99 of image-text requests: "
                     f"{r['p99_images_per_image_request']:.0f})")
        lines.append(f"{'system':<15}{'text:image':>10}{'p99':>7}{'x mono':>7}{'attain':>8}"
                     f"{'x mono':>7}{'P99 low ms':>12}  p99 max req/s at SLO factor "
                     f"{' '.join(r['factors'])}")
        for system, s in r["systems"].items():
            last = s["points"][-1]["rate_rps"]
            split = "32xTP-4" if system == "monolith" else "{}:{}".format(*s["text_image_split"])
            by = " ".join(_load(v, v is not None, last) for v in s["max_load_by_factor"].values())
            low = s["points"][0]
            lows = f"{low['ttft_p99_text_ms']:.0f}/{low['ttft_p99_image_ms']:.0f}"
            loads = [_load(s["max_load_rps"][c], s["bounded"][c], last) for c in CRITERIA]
            ratios = [_ratio(r["vs_monolith"][c].get(system)) for c in CRITERIA]
            lines.append(f"{system:<15}{split:>10}{loads[0]:>7}{ratios[0]:>7}{loads[1]:>8}"
                         f"{ratios[1]:>7}{lows:>12}  {by}")
    lines.append("\n(P99 low ms: text-only / image-text P99 TTFT at the lowest load)")
    return "\n".join(lines)


CLASSES = (("ttft_p99_text_ms", "text_ttft_slo_ms", "text-only"),
           ("ttft_p99_image_ms", "ttft_slo_ms", "image-text"))


def plot(results: dict[str, Any], path: Path) -> None:
    from bench.core.plot import pyplot, save

    plt = pyplot()
    from matplotlib.ticker import NullFormatter

    fig, axes = plt.subplots(len(results), 3, figsize=(16, 3.9 * len(results)), squeeze=False)
    for row, (name, r) in zip(axes, results.items(), strict=True):
        for ax, (key, slo_key, label) in zip(row[:2], CLASSES, strict=True):
            for system, s in r["systems"].items():
                xs = [p["rate_rps"] for p in s["points"]]
                ys = [min(p[key], 1e7) for p in s["points"]]
                ax.plot(xs, ys, marker="o", ms=3, label=system)
            ax.axhline(r[slo_key], color="k", ls="--", lw=1, label="SLO")
            ax.set(xscale="log", yscale="log", xlabel="load (requests/s)",
                   ylabel="P99 TTFT (ms)", title=f"{name}: {label} P99 TTFT (Fig. 14)")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_ylim(top=20 * r[slo_key])
            ax.legend(fontsize=7)
        _bars(row[2], name, r)
    save(fig, path, dpi=100)


def _bars(ax: Any, name: str, r: dict[str, Any]) -> None:
    """Max load per system, one bar per criterion, labelled with the ratio to the monolith."""
    names, width = list(r["systems"]), 0.4
    top = 1.0
    for c, crit in enumerate(CRITERIA):
        loads = [r["systems"][n]["max_load_rps"][crit] for n in names]
        top = max(top, *loads)
        xs = [i + (c - 0.5) * width for i in range(len(names))]
        bars = ax.bar(xs, loads, width, color=f"C{c}", alpha=0.8, label=crit)
        for bar, n, load in zip(bars, names, loads, strict=True):
            ratio = r["vs_monolith"][crit].get(n)
            text = f"{load:.0f}" + (f"\n{ratio:.1f}x" if ratio is not None else "")
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, load), ha="center",
                        va="bottom", fontsize=7)
    ax.set_xticks(range(len(names)), names, fontsize=8, rotation=12)
    ax.set(ylabel="max requests/s meeting the SLOs", ylim=(0, 1.3 * top),
           title=f"{name}: max load (Fig. 15)")
    ax.legend(fontsize=7, title="criterion", title_fontsize=7)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    run = Run()
    t0 = time.time()
    results = {name: run_model(name, args) for name in args.models}
    print(table(results, args.slo_factor))
    settings = settings_of(args)
    run.write(args.out, {"settings": settings, "seconds": round(time.time() - t0, 1),
                         "models": results}, settings=settings)
    plot(results, args.png)
    print(f"\nwrote {args.out} and {args.png} ({time.time() - t0:.0f} s)")
    return 0
