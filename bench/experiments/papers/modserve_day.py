"""ModServe's autoscaled day in the simulator (seed 001 §5.2 "Resource Allocation with
Autoscaling", Figure 16; docs/sim_generation.md "Autoscaled over a day"): ModServe and the
monolith, each autoscaled by the policy the live Serve hooks run (policies.autoscaling, driven by
app/sim/generation/autoscale.py) over one day with an image-driven burst, on at most 128 A100s,
for Llama3.2-11B (cross-attention) and InternVL2.5-26B (decoder-only). Prints a table (GPU-hours,
saving, P99 TTFT per class against the SLO, decision times), writes
docs/data_sim_autoscale_day.json and docs/figures/sim_autoscale_day.png.

    .venv/bin/python -m bench modserve-day
    ... --models internvl2.5-26b --compression 1      (the real day, no compression: slow)

The day runs `--compression` k times faster (every time constant of the policy and the trace's
arrival times / k, the request rates kept); `--check` runs it again at other k and prints the
saving at each (the figure's numbers should not depend on k).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.sim.generation.autoscale import Autoscaling, PolicyTiming
from app.sim.generation.autoscale_day import (
    MODSERVE,
    MONOLITH,
    DaySpec,
    day_summary,
    isolated_p99,
    run_day,
)
from app.sim.generation.modserve_profiles import MODELS
from bench.core.cli import experiment_parser, settings_of
from bench.core.paths import REPO as ROOT
from bench.core.result import Run
from policies.generation.ttft_slo import IMAGE_TEXT, TEXT_ONLY

# decision -> serving, real seconds (docs/sim_generation.md "Autoscaled over a day")
LLM_STARTUP_S = {"llama3.2-11b": 60.0, "internvl2.5-26b": 120.0}


def _parser() -> argparse.ArgumentParser:
    p = experiment_parser(__doc__, out=ROOT / "docs/data_sim_autoscale_day.json", seed=0)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=sorted(MODELS))
    p.add_argument("--mean-rps", type=float, nargs="*", default=[],
                   help="per model (in --models order); default: the rate at which the "
                        "monolith's arithmetic asks for 128 GPUs at the busiest period")
    p.add_argument("--compression", type=float, default=None,
                   help="k (default: about 3000 requests per rate window)")
    p.add_argument("--check", type=float, nargs="*", default=[2.0],
                   help="run again at these multiples of k (the saving must not depend on k)")
    p.add_argument("--slo-factor", type=float, default=None,
                   help="default: the tightest of 5, 7.5, 10, 15, 20 whose SLOs are at least "
                        "4/3 x both systems' isolated P99 TTFT of each class on the day")
    p.add_argument("--one-slo", action="store_true",
                   help="the image-text SLO for every request (default: per class, §5.1)")
    p.add_argument("--no-chunked-prefill", action="store_true",
                   help="LLM replicas prefill a prompt whole (the first model; default: chunked)")
    p.add_argument("--target-utilization", type=float, default=0.5)
    p.add_argument("--slo-floor", type=float, default=0.99,
                   help="SLO attainment under which a stage adds a replica (0: off)")
    p.add_argument("--period-s", type=float, default=300.0)
    p.add_argument("--window-s", type=float, default=None,
                   help="the replicas' rate window (default: the period)")
    p.add_argument("--scale-down-delay-s", type=float, default=600.0)
    p.add_argument("--encoder-startup-s", type=float, default=30.0)
    p.add_argument("--png", type=Path, default=ROOT / "docs/figures/sim_autoscale_day.png")
    return p


def day_spec(args: argparse.Namespace, model: str, rps: float | None) -> DaySpec:
    window_s = args.window_s if args.window_s is not None else args.period_s
    timing = PolicyTiming(args.period_s, window_s, args.scale_down_delay_s,
                          2 * args.period_s, args.encoder_startup_s, LLM_STARTUP_S[model])
    auto = Autoscaling(timing, args.target_utilization, args.slo_floor)
    return DaySpec(rps, args.compression, args.seed, args.slo_factor, not args.one_slo,
                   auto=auto, chunked_prefill=not args.no_chunked_prefill)


def one_day(model: str, day: DaySpec) -> tuple[DaySpec, dict[str, Any]]:
    t0 = time.time()
    setup, day, runs = run_day(model, day)
    systems = {name: day_summary(run, setup.slos) for name, run in runs.items()}
    mono, ms = (systems[n]["accelerator_hours"] for n in (MONOLITH, MODSERVE))
    k = day.compression or 1.0
    return day, {"compression": k, "systems": systems, "saving": 1.0 - ms / mono,
                 "requests_per_day": systems[MONOLITH]["requests"] * k,
                 "slo_factor": day.slo_factor, "slos_ms": setup.slos.by_class(),
                 "isolated_p99_ms": isolated_p99(setup, runs[MONOLITH].trace),
                 "seconds": round(time.time() - t0, 1)}


def run_model(model: str, rps: float | None, args: argparse.Namespace) -> dict[str, Any]:
    day, main = one_day(model, day_spec(args, model, rps))
    out: dict[str, Any] = {"mean_rps": day.mean_rps, "main": main, "checks": []}
    for m in args.check:
        _, check = one_day(model, replace(day, compression=(day.compression or 1.0) * m))
        for s in check["systems"].values():
            s.pop("timeline")
        out["checks"].append(check)
    return out


def _check(v: dict[str, Any]) -> str:
    gpu_h = [v["systems"][n]["accelerator_hours"] for n in (MONOLITH, MODSERVE)]
    meets = "".join("y" if v["systems"][n]["meets_slo"] else "n" for n in (MONOLITH, MODSERVE))
    return (f"k={v['compression']:g}: {v['saving']:.1%} ({gpu_h[0]:.0f} vs {gpu_h[1]:.0f} GPU-h, "
            f"SLO met {meets}, {v['seconds']:.0f} s)")


def _ms(v: float) -> str:
    return "inf" if not math.isfinite(v) else f"{v:.0f}"


def table(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [f"one day, image burst 06:30-09:30, <= 128 A100s; policy every {args.period_s:g} s, "
             f"target utilization {args.target_utilization:g}, SLO floor {args.slo_floor:g}"]
    for model, r in results.items():
        main = r["main"]
        slo = main["slos_ms"]
        lines.append(f"\n{model}: {r['mean_rps']:g} req/s outside the burst "
                     f"({main['requests_per_day'] / 1e6:.1f} M requests/day, simulated "
                     f"{main['compression']:g}x compressed); SLO factor {main['slo_factor']:g}: "
                     f"TTFT SLO text-only {slo[TEXT_ONLY]:.0f} ms, image-text "
                     f"{slo[IMAGE_TEXT]:.0f} ms")
        lines.append(f"{'system':<10}{'GPU-h':>7}{'peak':>6}{'mean':>7}{'saving':>8}"
                     f"{'P99 text':>10}{'P99 image':>11}{'attained':>10}{'meets':>7}"
                     f"{'floor text/image':>18}{'decide us: wall p50/p99':>25}{'cpu p99':>9}")
        for name, s in main["systems"].items():
            c, iso = s["classes"], main["isolated_p99_ms"][name]
            saving = f"{main['saving']:.1%}" if name == MODSERVE else "-"
            lines.append(
                f"{name:<10}{s['accelerator_hours']:>7.0f}{s['peak_accelerators']:>6d}"
                f"{s['mean_accelerators']:>7.1f}{saving:>8}"
                f"{_ms(c[TEXT_ONLY]['ttft_p99_ms']):>10}{_ms(c[IMAGE_TEXT]['ttft_p99_ms']):>11}"
                f"{s['slo_attainment']:>10.4f}{'yes' if s['meets_slo'] else 'NO':>7}"
                f"{_ms(iso[TEXT_ONLY]):>9}/{_ms(iso[IMAGE_TEXT]):<8}"
                f"{s['decision_p50_us']:>14.0f}/{s['decision_p99_us']:<9.0f}"
                f"{s['decision_cpu_p99_us']:>8.0f}")
        lines.append("saving by compression: " + ", ".join(_check(v) for v in [main, *r["checks"]]))
    return "\n".join(lines)


def plot(results: dict[str, Any], args: argparse.Namespace, path: Path) -> None:
    from bench.core.plot import pyplot, save

    plt = pyplot()

    n = len(results)
    fig, axes = plt.subplots(2 * n, 1, figsize=(10, 5.2 * n), squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1.2] * n})
    for i, (model, r) in enumerate(results.items()):
        main = r["main"]
        mono = main["systems"][MONOLITH]["timeline"]
        ms = main["systems"][MODSERVE]["timeline"]
        ax, lx = axes[2 * i][0], axes[2 * i + 1][0]
        enc = [h * 1 for h in ms["encoder_held"]]
        llm = [h * 4 for h in ms["llm_held"]]
        ax.stackplot(ms["hour"], llm, enc, step="post", alpha=0.75, colors=["#e7a3b3", "#7fa7d6"],
                     labels=["ModServe text instances (TP-4)", "ModServe image instances (TP-1)"])
        ax.step(mono["hour"], mono["accelerators"], where="post", color="k", lw=1.4,
                label="monolith (TP-4 replicas)")
        ax.set_xticks(range(0, 25, 2))
        ax.set(xlim=(0, 24), ylim=(0, 136), ylabel="A100s held",
               title=f"{model}: GPUs over the day, autoscaled (Fig. 16); ModServe saves "
                     f"{main['saving']:.1%} of the monolith's GPU-hours")
        ax.legend(fontsize=7, loc="upper right")
        lx.plot(ms["hour"], [v / 1e3 for v in ms["encoder_load_tokens_per_s"]], color="#2b6cb0",
                lw=1, label="image tokens/s at the encoders")
        lx.plot(ms["hour"], [v / 1e3 for v in ms["llm_load_tokens_per_s"]], color="#b83280",
                lw=1, label="LLM load (prompt tokens/s)")
        lx.set(xlim=(0, 24), xlabel="hour of day", ylabel="k tokens/s")
        lx.set_xticks(range(0, 25, 2))
        lx.legend(fontsize=7, loc="upper right")
    save(fig, path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    run = Run()
    rates = dict(zip(args.models, args.mean_rps, strict=False))
    t0 = time.time()
    results = {m: run_model(m, rates.get(m), args) for m in args.models}
    print(table(results, args))
    settings = settings_of(args)
    settings["llm_startup_s"] = {m: LLM_STARTUP_S[m] for m in args.models}
    run.write(args.out, {"settings": settings, "seconds": round(time.time() - t0, 1),
                         "models": results}, settings=settings)
    plot(results, args, args.png)
    print(f"\nwrote {args.out} and {args.png} ({time.time() - t0:.0f} s)")
    return 0
