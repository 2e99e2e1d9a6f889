"""python -m bench fidelity generation: the autoscaling burst demo (docs/data_autoscale_burst.json)
replayed in the simulator with the policy the Serve hooks run."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from bench.experiments.fidelity.compare import quantile
from bench.experiments.fidelity.generation.fit import live_ttft, prompt_shape, sim_config

log = logging.getLogger(__name__)


BURST_OFFSET_S = 5.0  # the simulation's clock = the demo's + this (room for the warm-up)
# the demo's warm-up before its t = 0 (bench/experiments/autoscaling/burst_run.py: the first image request, then
# the first text request, one at a time, then t = 0 a second later); not recorded: estimated
# from the requests' latencies (~0.2 s and ~0.03 s) and the 1 s lead
WARMUP_AT_S = (-1.3, -1.1)


def burst_live_requests(demo: dict[str, Any], warmup: bool) -> list[Any]:
    from bench.experiments.fidelity.generation.live_path import LiveRequest

    recs = demo["records"]
    rows = [LiveRequest(r["scheduled_s"] + BURST_OFFSET_S, r["num_images"], r.get("history_turns", 0),
                        r.get("prompt_tokens"), r.get("completion_tokens")) for r in recs]
    if warmup:
        first_image = next(r for r in recs if r["num_images"])
        first_text = next(r for r in recs if not r["num_images"])
        rows += [replace(row, arrival_s=at + BURST_OFFSET_S) for at, row in zip(
            WARMUP_AT_S, (LiveRequest(0, first_image["num_images"], 0,
                                      first_image["prompt_tokens"],
                                      first_image["completion_tokens"]),
                          LiveRequest(0, 0, 0, first_text["prompt_tokens"],
                                      first_text["completion_tokens"])), strict=True)]
    return sorted(rows, key=lambda r: r.arrival_s)


def burst_settings(demo: dict[str, Any], startup: dict[str, float]) -> Any:
    from policies.autoscaling import AppScalingSettings, ScalingSettings

    sc, caps = demo["scaling"], demo["capacities_per_replica"]

    def stage(cap: float, hi: int, startup_s: float) -> ScalingSettings:
        return ScalingSettings(cap, 1, hi, sc["target_utilization"], sc["scale_down_delay_s"],
                               startup_s, 10.0, 0.99)  # trend window, floor: the defaults

    return AppScalingSettings(stage(caps["ImageEncoder"], sc["encoder_max"],
                                    sc["encoder_startup_s"]),
                              stage(caps["LLMBackend"], sc["llm_max"], sc["llm_startup_s"]))


def burst_replay(demo: dict[str, Any], profiles: Any, costs: Any, warmup: bool
                 ) -> dict[str, Any]:
    from app.sim.generation.autoscale import Autoscaling, Capacities, PolicyTiming
    from bench.experiments.fidelity.generation.burst_replay import (
        LiveMeteredSim,
        ServeAutoscaler,
        ServeTiming,
        compare_counts,
        measured_startup_s,
        replay,
    )
    from bench.experiments.fidelity.generation.live_path import live_requests
    from policies.autoscaling import ENCODER, LLM

    sc, series = demo["scaling"], demo["series"]
    startup = {ENCODER: measured_startup_s(series, "encoder") or sc["encoder_startup_s"],
               LLM: measured_startup_s(series, "llm") or sc["llm_startup_s"]}
    settings = {"llm_replicas": 1, "encoder_replicas": 1, "slo_ms": demo["spec"]["slo_ms"],
                "max_num_seqs": 32}
    cfg = sim_config("full", settings)
    cfg = replace(cfg, encoder=replace(cfg.encoder, startup_s=startup[ENCODER]),
                  llm=replace(cfg.llm, startup_s=startup[LLM]))
    shape = prompt_shape({"base_prompt_tokens": 12, "turn_tokens": 14, "tokens_per_image": 18},
                         profiles)
    reqs = live_requests(burst_live_requests(demo, warmup), shape)
    timing = ServeTiming(0.1, sc["metrics_interval_s"], sc["look_back_period_s"],
                         sc["rate_window_s"])
    app = burst_settings(demo, startup)
    caps = Capacities(app.encoder.capacity_tokens_per_s, app.llm.capacity_tokens_per_s,
                      profiles.encoder.tokens_per_image)
    scaler = ServeAutoscaler(app, caps, Autoscaling(PolicyTiming(), max_accelerators=1000),
                             {ENCODER: 1, LLM: 1}, False, timing=timing)
    sim = LiveMeteredSim(reqs, profiles, cfg, costs, window_s=timing.rate_window_s)
    live_rows = [{"t_s": r["t_s"], "encoder": r["encoder"], "llm": r["llm"]} for r in series]
    rep = replay(sim, scaler, [r["t_s"] for r in series], BURST_OFFSET_S)
    counted = [(t - a) * 1e3 if t == t else float("inf")  # NaN: no first token
               for t, a in zip(rep.sim.first, rep.sim.arrival, strict=True)
               if a >= BURST_OFFSET_S]
    live_ttft_ms = live_ttft(demo["records"])
    return {"warmup": warmup, "startup_s_measured": startup, "compare": compare_counts(
                live_rows, rep.rows), "sim_series": rep.rows,
            "ttft_ms": {"live_p50": quantile(live_ttft_ms, 0.5),
                        "live_p99": quantile(live_ttft_ms, 0.99),
                        "sim_p50": quantile(counted, 0.5), "sim_p99": quantile(counted, 0.99)}}


# ---- output ----------------------------------------------------------------------------------
