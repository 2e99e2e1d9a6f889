"""ModServe's autoscaled day (seed 001 §5.2 "Resource Allocation with Autoscaling", Figure 16) in
the simulator: ModServe (image instances TP-1 + text instances TP-4, token routing, deadline
order) and the monolith (TP-4 replicas, least outstanding requests, FIFO), each autoscaled by
autoscale.py over one day with an image-driven burst, on at most `max_accelerators`.

Workload: `workload.one_day_image_burst` (arrivals and images per request of the generator's
production-like day) with experiment.py's short prompts (ShareGPT-4o-like text, §5.1: the trace's
arrivals and image counts, the dataset's text), the same trace for both models. The SLO is
experiment.py's (`make_setup`). The capacities are read from the stage profiles at the SLOs
(TBT SLO: slo_factor x the batch-1 TBT), the decode cost counted at the previous day's output
per prompt token; initial replicas from the previous day (another seed): ModServe's
`initial_replicas`, the monolith's ceil(median load / capacity).

Time compression (`compression` k): the day is simulated k times faster: the trace at the same
request rates with arrival times / k (a day of mean_rps / k requests/s, time-scaled), and every
time constant of the policy (period, window, delays, startups) / k. Request-level times (ms)
stay; accelerator-hours are reported for the real day (x k).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.generation.autoscale import (
    Autoscaler,
    Autoscaling,
    Capacities,
    PolicyTiming,
    app_settings,
    autoscaled,
    capacities,
)
from app.sim.generation.experiment import (
    IMAGE_TEXT_PROMPT,
    TEXT_ONLY_PROMPT,
    Setup,
    make_setup,
    system_config,
)
from app.sim.generation.metrics import percentile
from app.sim.generation.modserve_profiles import IMAGE_TP, MONOLITH_TP, TEXT_TP
from app.sim.generation.sim import GenSimResult
from app.sim.generation.workload import TraceArrays, generate_arrays, one_day_image_burst
from policies.autoscaling import ENCODER, LLM, History, initial_replicas, replicas_for
from policies.generation.stage_profile import StageProfiles
from policies.generation.token_routing import Architecture
from policies.generation.ttft_slo import IMAGE_TEXT, TEXT_ONLY, TTFTSLOs

MONOLITH, MODSERVE = "monolith", "modserve"
SYSTEMS = (MONOLITH, MODSERVE)
TP = {MONOLITH: {LLM: MONOLITH_TP}, MODSERVE: {ENCODER: IMAGE_TP, LLM: TEXT_TP}}


SLO_FACTORS = (5.0, 7.5, 10.0, 15.0, 20.0)  # python -m bench modserve's (ModServe §5.3)
REQUESTS_PER_WINDOW = 3000  # compression None: k keeps about this many requests per window
FLOOR_SHARE = 0.75  # an SLO is usable when the isolated P99 of each class is within this share


@dataclass(frozen=True)
class DaySpec:
    mean_rps: float | None = None  # requests/s outside the burst (real time); None: rate_for_peak
    compression: float | None = None  # None: mean_rps x window_s / REQUESTS_PER_WINDOW, >= 1
    seed: int = 0
    slo_factor: float | None = None  # None: usable_slo_factor
    per_class_slo: bool = True  # experiment.make_setup's (False: the image-text SLO for all)
    auto: Autoscaling = Autoscaling(PolicyTiming())  # real-time constants
    chunked_prefill: bool = True  # the LLM replicas' (experiment.Setup; False: whole prompts)


def day_trace(mean_rps: float, compression: float, seed: int) -> TraceArrays:
    """One day at `mean_rps` compressed k times (module docstring)."""
    spec = replace(one_day_image_burst(mean_rps / compression),
                   text_only_prompt=TEXT_ONLY_PROMPT, image_text_prompt=IMAGE_TEXT_PROMPT)
    t = generate_arrays(spec, seed)
    return TraceArrays(t.arrival_s / compression, t.text_tokens, t.num_images, t.output_tokens,
                       t.duration_s / compression)


def prompt_tokens(trace: TraceArrays, profiles: StageProfiles) -> NDArray[np.float64]:
    """Route (prefill) tokens per request: text, + image tokens for decoder-only."""
    text = trace.text_tokens.astype(np.float64)
    if profiles.llm.architecture is Architecture.CROSS_ATTENTION:
        return text
    return text + trace.num_images * float(profiles.encoder.tokens_per_image)


def binned(trace: TraceArrays, bin_s: float, values: NDArray[Any]) -> NDArray[np.float64]:
    bins = int(np.ceil(trace.duration_s / bin_s))
    idx = np.minimum((trace.arrival_s // bin_s).astype(np.int64), bins - 1)
    return np.bincount(idx, weights=values.astype(np.float64), minlength=bins).astype(np.float64)


def history(trace: TraceArrays, bin_s: float, encode_s: float) -> History:
    """A past day as ModServe's history: one sample per bin."""
    n = binned(trace, bin_s, np.ones(len(trace)))
    seen = n > 0
    images = binned(trace, bin_s, trace.num_images)
    text = binned(trace, bin_s, trace.text_tokens)
    return History(tuple(images / bin_s), (encode_s,), tuple(n / bin_s),
                   tuple(images[seen] / n[seen]), tuple(text[seen] / n[seen]))


def monolith_initial(past: TraceArrays, bin_s: float, profiles: StageProfiles, caps: Capacities,
                     settings: Any) -> int:
    """ceil(median prefill-equivalent load / capacity) over the past day's bins."""
    load = binned(past, bin_s, prompt_tokens(past, profiles)
                  + past.num_images * caps.image_token_equivalent) / bin_s
    return replicas_for(float(statistics.median(load.tolist())), settings)


@dataclass(frozen=True)
class SystemDay:
    system: str
    result: GenSimResult
    scaler: Autoscaler
    capacities: Capacities
    initial: dict[str, int]
    compression: float
    trace: TraceArrays


def decode_ratio(setup: Setup, past: TraceArrays) -> float:
    """Output tokens per prompt (route) token of the past day: the decode cost the LLM's
    capacity counts."""
    return float(past.output_tokens.mean() / prompt_tokens(past, setup.disaggregated).mean())


def system_capacities(setup: Setup, system: str, past: TraceArrays) -> Capacities:
    profiles = setup.monolith if system == MONOLITH else setup.disaggregated
    tbt_slo_ms = setup.slo_factor * setup.disaggregated.llm.tbt_time_ms(1)
    return capacities(profiles, setup.slos, tbt_slo_ms, decode_ratio(setup, past),
                      system_config(setup, system, 0.0, 0).encoder_max_batch)


def run_system(setup: Setup, system: str, trace: TraceArrays, past: TraceArrays,
               day: DaySpec) -> SystemDay:
    """One system through the (compressed) day."""
    if system not in SYSTEMS:
        raise ValueError(f"unknown system {system!r}; valid: {list(SYSTEMS)}")
    profiles = setup.monolith if system == MONOLITH else setup.disaggregated
    k = day.compression or 1.0
    auto = replace(day.auto, timing=day.auto.timing.compressed(k))
    caps, tp = system_capacities(setup, system, past), TP[system]
    settings = app_settings(caps, auto, profiles.llm.architecture, tp)
    t = auto.timing
    if system == MONOLITH:
        initial = {LLM: monolith_initial(past, t.period_s, profiles, caps, settings.llm)}
    else:
        encode_s = profiles.encoder.latency_ms(1) / 1000.0
        initial = initial_replicas(history(past, t.period_s, encode_s), settings,
                                   profiles.encoder.tokens_per_image)
    cfg = system_config(setup, system, 0.0, day.seed)
    cfg = replace(cfg, llm=replace(cfg.llm, replicas=initial[LLM], startup_s=t.llm_startup_s))
    if system == MODSERVE:
        cfg = replace(cfg, encoder=replace(cfg.encoder, replicas=initial[ENCODER],
                                           startup_s=t.encoder_startup_s))
    result, scaler = autoscaled(trace, profiles, cfg, caps, auto, tp)
    return SystemDay(system, result, scaler, caps, initial, k, trace)


def isolated_p99(setup: Setup, trace: TraceArrays) -> dict[str, dict[str, float]]:
    """Per system and class, the P99 over the trace of each request's TTFT alone on an idle
    system (monolith: its vision tower then its prefill; ModServe: one image per encoder, the
    transfer, the prefill): a floor under any P99 TTFT the system can reach on it."""
    out = {}
    images = trace.num_images
    for system in SYSTEMS:
        p = setup.monolith if system == MONOLITH else setup.disaggregated
        tokens, inverse = np.unique(prompt_tokens(trace, p), return_inverse=True)
        ttft = np.array([p.llm.prefill_time_ms(x) for x in tokens])[inverse]
        if system == MONOLITH:
            counts, where = np.unique(images, return_inverse=True)
            ttft += np.array([p.encoder.latency_ms(n) if n else 0.0 for n in counts])[where]
        else:
            ttft += np.where(images > 0, p.encoder.latency_ms(1)
                             + images * setup.transfer_ms_per_image, 0.0)
        out[system] = {TEXT_ONLY: percentile(ttft[images == 0], 99),
                       IMAGE_TEXT: percentile(ttft[images > 0], 99)}
    return out


def usable_slo_factor(model: str, trace: TraceArrays, per_class_slo: bool = True) -> float:
    """The tightest of SLO_FACTORS whose SLOs are at least 1 / FLOOR_SHARE x every system's
    isolated P99 of every class on `trace` (the last one if none is)."""
    for factor in SLO_FACTORS:
        setup = make_setup(model, factor, per_class_slo)
        slos = setup.slos.by_class()
        if all(v <= FLOOR_SHARE * slos[c] for f in isolated_p99(setup, trace).values()
               for c, v in f.items()):
            return factor
    return SLO_FACTORS[-1]


def rate_for_peak(setup: Setup, day: DaySpec, reference_rps: float = 20.0) -> float:
    """The mean_rps at which the monolith's token arithmetic asks for `max_accelerators` at the
    day's busiest period (its expected load, from a day at `reference_rps`)."""
    ref = day_trace(reference_rps, 1.0, day.seed + 2)
    caps = system_capacities(setup, MONOLITH, ref)
    period = day.auto.timing.period_s
    load = binned(ref, period, prompt_tokens(ref, setup.monolith)
                  + ref.num_images * caps.image_token_equivalent) / period
    replicas = day.auto.max_accelerators // MONOLITH_TP
    return reference_rps * replicas * caps.llm_tokens_per_s * day.auto.target_utilization \
        / float(load.max())


def class_ttft(result: GenSimResult, slos: TTFTSLOs) -> dict[str, dict[str, float]]:
    """P99 TTFT and SLO attainment per class (policies.generation.ttft_slo); no first token
    counts as infinitely late."""
    ttft = result.ttft_ms()
    late = np.where(np.isnan(ttft), np.inf, ttft)
    out = {}
    for name, mask in ((TEXT_ONLY, result.num_images == 0), (IMAGE_TEXT, result.num_images > 0)):
        v, slo = late[mask], slos.by_class()[name]
        out[name] = {"requests": int(v.size), "ttft_p99_ms": percentile(v, 99),
                     "ttft_p50_ms": percentile(v, 50), "slo_ms": slo,
                     "slo_attainment": float((v <= slo).mean()) if v.size else 1.0}
    return out


def day_summary(run: SystemDay, slos: TTFTSLOs) -> dict[str, Any]:
    k, r = run.compression, run.result
    ticks = run.scaler.ticks
    us = np.asarray(run.scaler.decision_ns, dtype=np.float64) / 1000.0
    cpu_us = np.asarray(run.scaler.decision_cpu_ns, dtype=np.float64) / 1000.0
    late = np.where(np.isnan(r.ttft_ms()), np.inf, r.ttft_ms())
    classes = class_ttft(r, slos)
    in_time = late <= np.where(r.num_images > 0, slos.slo_ms(1), slos.slo_ms(0))
    return {
        "accelerator_hours": r.accelerator_seconds * k / 3600.0,
        "peak_accelerators": max((t.accelerators for t in ticks), default=0),
        "mean_accelerators": r.accelerator_seconds / max(r.end_s, 1e-9),
        "requests": len(r.arrival_s), "ttft_p99_ms": percentile(late, 99),
        "classes": classes, "initial": run.initial,
        "slo_attainment": float(in_time.mean()) if in_time.size else 1.0,
        "meets_slo": slos.meets({c: v["ttft_p99_ms"] for c, v in classes.items()}),
        "capacity_tokens_per_s": {"encoder": run.capacities.encoder_tokens_per_s,
                                  "llm": run.capacities.llm_tokens_per_s,
                                  "image_token_equivalent":
                                      run.capacities.image_token_equivalent},
        "decisions": len(us), "decision_p50_us": percentile(us, 50),
        "decision_p99_us": percentile(us, 99), "decision_max_us": float(us.max(initial=0.0)),
        "decision_cpu_p50_us": percentile(cpu_us, 50), "decision_cpu_p99_us": percentile(
            cpu_us, 99), "budget_clamps": run.scaler.clamped,
        "timeline": timeline(run)}


def timeline(run: SystemDay) -> dict[str, list[Any]]:
    """Per decision: hour of the real day, held replicas and accelerators, loads."""
    k = run.compression
    ticks = run.scaler.ticks
    stages = list(ticks[0].held) if ticks else []
    out: dict[str, list[Any]] = {"hour": [round(t.time_s * k / 3600.0, 4) for t in ticks],
                                 "accelerators": [t.accelerators for t in ticks]}
    for s in stages:
        out[f"{s}_held"] = [t.held[s] for t in ticks]
        out[f"{s}_target"] = [t.target[s] for t in ticks]
        out[f"{s}_load_tokens_per_s"] = [round(t.load_tokens_per_s[s], 1) for t in ticks]
        out[f"{s}_reason"] = [t.reason[s] for t in ticks]
    return out


def run_day(model: str, day: DaySpec, systems: tuple[str, ...] = SYSTEMS
            ) -> tuple[Setup, DaySpec, dict[str, SystemDay]]:
    """Both systems through the day; `day` with its SLO factor, rate and compression filled
    in where None."""
    factor = day.slo_factor if day.slo_factor is not None else usable_slo_factor(
        model, day_trace(2.0, 1.0, day.seed), day.per_class_slo)
    setup = replace(make_setup(model, factor, day.per_class_slo),
                    chunked_prefill=day.chunked_prefill)
    rps = day.mean_rps if day.mean_rps is not None else round(rate_for_peak(setup, day), 1)
    k = day.compression if day.compression is not None else float(
        max(1, round(rps * day.auto.timing.window_s / REQUESTS_PER_WINDOW)))
    day = replace(day, slo_factor=factor, mean_rps=rps, compression=k)
    trace, past = (day_trace(rps, k, day.seed + i) for i in (0, 1))
    return setup, day, {s: run_system(setup, s, trace, past, day) for s in systems}
