"""Can the monolith meet the day's SLO at all, and at what cost: the monolith's GPU-hours at the
same P99 TTFT SLO as ModServe (docs/sim_generation.md, "Autoscaled over a day").

The day figure (python -m bench modserve-day) autoscales both systems with the same knobs and
finds the monolith missing its text-only SLO all day. Here the monolith alone goes through the
same day (the figure's JSON: rate, compression, SLO factor, timing) with more and more GPUs:
lower target utilizations, and finally pinned at the 128-GPU budget all day (32 TP-4 replicas,
no scaling). The least GPU-hours among the settings that meet every class's P99 TTFT SLO is
what a monolith pays at ModServe's SLO; if none meets it, no monolith within the budget does.

    .venv/bin/python -m bench modserve-monolith-at-slo [--models llama3.2-11b internvl2.5-26b] \\
        [--utilizations 0.25] [--from docs/data_sim_autoscale_day.json]
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.sim.generation.autoscale import Autoscaling, PolicyTiming
from app.sim.generation.autoscale_day import MODSERVE, MONOLITH, DaySpec, day_summary, run_day
from app.sim.generation.modserve_profiles import MONOLITH_TP
from bench.core.cli import experiment_parser, settings_of
from bench.core.paths import REPO as ROOT
from bench.core.result import Run, read_result

STATIC = "static-128"


def figure_day(fig: dict[str, Any], model: str) -> DaySpec:
    """The figure's DaySpec for `model` (its rate, compression, SLO factor and timing)."""
    s, m = fig["settings"], fig["models"][model]
    window_s = s["window_s"] if s["window_s"] is not None else s["period_s"]
    timing = PolicyTiming(s["period_s"], window_s, s["scale_down_delay_s"], 2 * s["period_s"],
                          s["encoder_startup_s"], s["llm_startup_s"][model])
    return DaySpec(m["mean_rps"], m["main"]["compression"], s["seed"], m["main"]["slo_factor"],
                   not s["one_slo"], Autoscaling(timing, s["target_utilization"],
                                                 s["slo_floor"]),
                   chunked_prefill=not s["no_chunked_prefill"])


def monolith_day(model: str, day: DaySpec, setting: str) -> dict[str, Any]:
    t0 = time.time()
    if setting == STATIC:
        # min = max: the whole budget all day (32 TP-4 replicas of 128 A100s)
        auto = replace(day.auto, min_replicas=day.auto.max_accelerators // MONOLITH_TP)
    else:
        auto = replace(day.auto, target_utilization=float(setting))
    setup, _, runs = run_day(model, replace(day, auto=auto), systems=(MONOLITH,))
    s = day_summary(runs[MONOLITH], setup.slos)
    s.pop("timeline", None)
    return {"setting": setting, "seconds": round(time.time() - t0, 1), **s}


def main(argv: list[str] | None = None) -> int:
    p = experiment_parser(__doc__, out=ROOT / "docs/data_sim_monolith_at_slo.json")
    p.add_argument("--models", nargs="+", default=["llama3.2-11b", "internvl2.5-26b"])
    p.add_argument("--utilizations", nargs="*", default=[], help="besides the budget pinned")
    p.add_argument("--from", dest="fig", type=Path,
                   default=ROOT / "docs/data_sim_autoscale_day.json")
    a = p.parse_args(argv)
    run = Run()
    fig = read_result(a.fig)["data"]
    out: dict[str, Any] = {"from": str(a.fig), "models": {}}
    for model in a.models:
        day = figure_day(fig, model)
        ms = fig["models"][model]["main"]["systems"][MODSERVE]
        runs = [monolith_day(model, day, u) for u in [*a.utilizations, STATIC]]
        met = [r for r in runs if r["meets_slo"]]
        best = min(met, key=lambda r: r["accelerator_hours"]) if met else None
        out["models"][model] = {
            "modserve_gpu_hours": ms["accelerator_hours"], "modserve_meets": ms["meets_slo"],
            "monolith": runs, "monolith_at_slo": best and best["setting"],
            "saving_at_same_slo": (1 - ms["accelerator_hours"] / best["accelerator_hours"]
                                   if best else None)}
        print(f"{model}: ModServe {ms['accelerator_hours']:.0f} GPU-h (meets "
              f"{ms['meets_slo']})")
        for r in runs:
            print(f"  monolith {r['setting']:>10}: {r['accelerator_hours']:7.0f} GPU-h, P99 TTFT "
                  + ", ".join(f"{c} {v['ttft_p99_ms']:.0f}/{v['slo_ms']:.0f} ms"
                              for c, v in r["classes"].items())
                  + f", meets {r['meets_slo']} ({r['seconds']:.0f} s)")
        verdict = (f"saving at the same SLO {100 * out['models'][model]['saving_at_same_slo']:.1f}%"
                   if best else f"no monolith within {day.auto.max_accelerators} GPUs meets the SLO")
        print(f"  -> {verdict}")
    run.write(a.out, out, settings=settings_of(a))
    print(f"wrote {a.out}")
    return 0
