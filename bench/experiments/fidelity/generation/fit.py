"""python -m bench fidelity generation: the live runs of the generation benchmark rebuilt in the simulator
(bench/experiments/fidelity/generation/live_path.py), the live path's costs calibrated at the lowest load, every other
load predicted and judged."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench.core.result import read_result
from bench.experiments.fidelity.compare import Comparison, p99_spread, quantile
from bench.experiments.fidelity.generation.measure import ENGINE_CLASSES

log = logging.getLogger(__name__)


# ---- the fit: live runs rebuilt in the simulator ---------------------------------------------
ABLATION = {  # bench/experiments/generation_systems/systems.py ABLATION, as simulator settings
    "monolith": ("monolith", "least_requests", "fifo"),
    "decoupled": ("disaggregated", "least_requests", "fifo"),  # pow2 of 2 = the less loaded
    "decoupled+priority": ("disaggregated", "least_requests", "deadline"),
    "full": ("disaggregated", "tokens", "deadline"),
}
MAX_PREFILL_TOKENS = 2048  # vLLM's chunked-prefill budget per step
TOLERANCE = 0.2  # the P99 TTFT's, relative to live
ENCODER_MAX_BATCH = 8  # deployments/generation/encoder.py max_batch_images (the default)


def sim_config(system: str, settings: dict[str, Any], slo_ms: float | None = None) -> Any:
    from app.sim.generation.config import GenSimConfig, StageConfig

    path, routing, order = ABLATION[system]
    mono = path == "monolith"
    return GenSimConfig(
        path, StageConfig(int(settings["llm_replicas"]), routing=routing, order=order),
        StageConfig(0 if mono else int(settings["encoder_replicas"]), routing=routing,
                    order=order),
        ttft_slo_ms=float(slo_ms or settings["slo_ms"]), encoder_max_batch=ENCODER_MAX_BATCH,
        max_running=int(settings["max_num_seqs"]), max_prefill_tokens=MAX_PREFILL_TOKENS,
        drop_lost=True)


def prompt_shape(model_shape: dict[str, Any], profiles: Any) -> Any:
    """The live prompt's token counts (the benchmark's ContextShape: its tokens_per_image is an
    upper bound, one more than the template adds: checked against the records in the tests)."""
    from bench.experiments.fidelity.generation.live_path import PromptShape

    return PromptShape(int(model_shape["base_prompt_tokens"]), int(model_shape["turn_tokens"]),
                       int(model_shape["tokens_per_image"]) - 1,
                       profiles.encoder.tokens_per_image)


def read_records(records_dir: Path, system: str, rate: float) -> list[dict[str, Any]] | None:
    path = records_dir / f"{system.replace('+', '_')}_{rate:g}.jsonl"
    if not path.is_file():
        return None
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def live_ttft(records: list[dict[str, Any]]) -> list[float]:
    """Per request: TTFT at the client, inf without a first token (the benchmark's P99)."""
    return [r["ttft_ms"] if r["status"] == "ok" and r["ttft_ms"] is not None else float("inf")
            for r in records]


def workload_check(run: dict[str, Any], rate: float, records: list[dict[str, Any]],
                   pool: Any) -> bool:
    """The benchmark's workload rebuilt from its settings is the one the records were sent."""
    from app.sim.traces.chat_spec import ChatTrafficSpec, ContextShape
    from bench.workloads.chat import make_workload

    s = run["settings"]
    spec = replace(ChatTrafficSpec(**s["workload"]), rate_rps=rate, duration_s=s["duration_s"],
                   seed=s["seed"])
    reqs = make_workload(spec, ContextShape(**run["model_shape"]), pool)
    return len(reqs) == len(records) and all(
        abs(a.arrival_s - b["scheduled_s"]) < 1e-9 and a.num_images == b["num_images"]
        and len(a.history) == b["history_turns"] for a, b in zip(reqs, records, strict=True))


def sim_requests(records: list[dict[str, Any]], shape: Any) -> list[Any]:
    from bench.experiments.fidelity.generation.live_path import LiveRequest, live_requests

    return live_requests([LiveRequest(r["scheduled_s"], r["num_images"], r["history_turns"],
                                      r.get("prompt_tokens"), r.get("completion_tokens"))
                          for r in records], shape)


def calibrate(records: list[dict[str, Any]], cfg: Any, profiles: Any, shape: Any
              ) -> tuple[Any, list[float]]:
    """Path costs from the lowest load's requests (live_path.fit_path_costs), and what they
    leave unexplained per request there."""
    import numpy as np

    from app.sim.generation.sim import simulate
    from bench.experiments.fidelity.generation.live_path import (
        fit_path_costs,
        image_hops,
        residuals,
    )

    reqs = sim_requests(records, shape)
    core = simulate(reqs, profiles, cfg).ttft_ms()
    core_ms = np.where(np.isnan(core), np.inf, core).tolist()
    images = [r.num_images for r in reqs]
    hops = [image_hops(m, cfg) for m in images]
    costs = fit_path_costs(live_ttft(records), core_ms, images, hops)
    return costs, residuals(live_ttft(records), core_ms, images, hops, costs).tolist()


def path_processes(system: str, settings: dict[str, Any]) -> int:
    """The processes a request's path runs in (each one event-loop thread): Serve's proxy, the
    ingress, the LLM replicas and, disaggregated, the encoder replicas (their decoding and
    hand-over; bench/experiments/fidelity/generation/shared_cores.py caps the path's runnable threads there)."""
    encoders = int(settings["encoder_replicas"]) if ABLATION[system][0] != "monolith" else 0
    return 2 + int(settings["llm_replicas"]) + encoders


HOST_IDLE_ONLY = ("classifier",)  # idle in these runs: not on the request path


def _cores(phase: dict[str, Any], classes: Any) -> float:
    return sum(v for k, v in phase["cpu_s"].items() if k in classes) / phase["wall_s"]


def cpu_terms(measured: dict[str, Any], rate: float) -> dict[str, Any] | None:
    """From a `measure` run of one system at `rate`: the path's CPU seconds per request (every
    process but vLLM's engine, beyond its idle use, plus the client's), the machine's cores,
    and what else wanted them meanwhile (the competitors, in busy cores: vLLM's engine
    processes, the path processes' idle use, every other process on the machine)."""
    phases = {p["phase"]: p for p in measured.get("phases", [])}
    run, idle = phases.get(f"rate {rate:g}"), phases.get("idle")
    if run is None or idle is None:
        return None
    host = {k for p in (run, idle) for k in p["cpu_s"]} - set(ENGINE_CLASSES)
    sent = run["result"]["stats"]["sent"]
    path_cores = _cores(run, host) - _cores(idle, host)
    system_cores = _cores(run, set(run["cpu_s"]))
    client_cores = run["client_cpu_s"] / run["wall_s"]
    background = max(0.0, run["machine_busy_s"] / run["wall_s"] - system_cores - client_cores)
    cores = float(run.get("machine_cores") or os.cpu_count() or 2)
    engine = _cores(run, ENGINE_CLASSES)
    return {"path_cpu_ms_per_request": (path_cores + client_cores) * run["wall_s"] / sent * 1e3,
            "engine_cores": engine, "path_idle_cores": _cores(idle, host),
            "background_cores": background, "machine_cores": cores,
            "host_cores": cores, "competitors": engine + _cores(idle, host) + background,
            "by_class_cores": {k: round(v / run["wall_s"], 3) for k, v in run["cpu_s"].items()},
            "idle_by_class_cores": {k: round(v / idle["wall_s"], 3)
                                    for k, v in idle["cpu_s"].items()}}


def with_cpu(costs: Any, records: list[dict[str, Any]], cfg: Any, terms: dict[str, Any]) -> Any:
    """`costs` with the measured CPU share of its latency and the cores it shares."""
    from bench.experiments.fidelity.generation.live_path import image_hops

    lat = [costs.latency_ms(r["num_images"], image_hops(r["num_images"], cfg)) for r in records]
    share = terms["path_cpu_ms_per_request"] / (sum(lat) / len(lat))
    return replace(costs, cpu_share=share, host_cores=terms["host_cores"],
                   competitors=terms["competitors"])


def predict(records: list[dict[str, Any]], cfg: Any, profiles: Any, shape: Any,
            variants: dict[str, Any], spread_ms: list[float]) -> dict[str, Any]:
    """Each variant's simulated TTFT; "+spread": the headline's costs plus, per request, a
    draw from the calibration load's unexplained residuals."""
    from app.sim.generation.metrics import summarize
    from bench.experiments.fidelity.generation.live_path import simulate_live, spread_draws

    reqs = sim_requests(records, shape)
    out = {}
    for name, costs in variants.items():
        extra = spread_draws(spread_ms, len(reqs)) if name.endswith("+spread") else None
        s = summarize(simulate_live(reqs, profiles, cfg, costs, extra))
        out[name] = {"ttft_p50_ms": s.ttft_p50_ms, "ttft_p99_ms": s.ttft_p99_ms,
                     "no_first_token_share": (s.lost + s.unfinished) / max(1, s.requests),
                     "slo_attainment": s.slo_attainment}
    return out


def cpu_source(measured: dict[str, Any] | None, system: str, rate: float
               ) -> tuple[dict[str, Any] | None, str | None]:
    """The CPU terms of `system` from the measured run, or (disaggregated systems it did not
    measure) those of `full`, the disaggregated system it did."""
    systems = (measured or {}).get("systems", {})
    for name in (system, "full" if ABLATION[system][0] == "disaggregated" else None):
        if name in systems:
            rates = sorted(float(r) for r in measured["settings"]["rates"])  # type: ignore[index]
            terms = cpu_terms(systems[name], rates[0])
            if terms is not None:
                return terms, f"{name} at {rates[0]:g} req/s"
    return None, None


def HEADLINE(variants: dict[str, Any]) -> str:  # noqa: N802 (reads as a constant)
    """The model the verdicts judge: the stages and the path on the shared cores where CPU
    was measured ("shared": only the path's work shares them, the earlier model)."""
    return "shared+stages" if "shared+stages" in variants else "path"


def fit_system(system: str, run: dict[str, Any], recs: dict[float, list[dict[str, Any]]],
               profiles: Any, measured: dict[str, Any] | None) -> tuple[dict[str, Any], list]:
    from bench.experiments.fidelity.generation.live_path import PathCosts

    settings = run["settings"]
    shape = prompt_shape(run["model_shape"], profiles)
    low = min(recs)
    cfg = sim_config(system, settings)
    costs, spread = calibrate(recs[low], cfg, profiles, shape)
    terms, source = cpu_source(measured, system, low)
    variants = {"stages": PathCosts(), "path": costs}
    if terms is not None:
        variants["shared"] = with_cpu(costs, recs[low], cfg, terms)
        variants["shared+stages"] = replace(variants["shared"], stages_share=True,
                                            engine_cores=terms["engine_cores"],
                                            path_threads=path_processes(system, settings))
    variants[HEADLINE(variants) + "+spread"] = variants[HEADLINE(variants)]
    calib = {"calibration_rate_rps": low, "path_costs": asdict(variants[HEADLINE(variants)]),
             "cpu_terms": terms, "cpu_terms_from": source,
             "residual_ms": {"p50": quantile(spread, 0.5), "p90": quantile(spread, 0.9),
                             "p99": quantile(spread, 0.99), "max": max(spread)}}
    rows = []
    for rate in sorted(recs):
        live = live_ttft(recs[rate])
        sim = predict(recs[rate], cfg, profiles, shape, variants, spread)
        judged = {key: p99_comparison(system, rate, quantile(live, 0.99),
                                      sim[key]["ttft_p99_ms"], rate == low)
                  for key in (HEADLINE(sim), HEADLINE(sim) + "+spread", "shared") if key in sim}
        err, why = _verdict(judged[HEADLINE(sim)])
        err2, why2 = _verdict(judged[HEADLINE(sim) + "+spread"])
        err3, why3 = (_verdict(judged["shared"]) if "shared+stages" in sim else (None, "-"))
        rows.append({"system": system, "rate_rps": rate, "calibration": rate == low,
                     "requests": len(live),
                     "live": {"ttft_p50_ms": quantile(live, 0.5),
                              "ttft_p99_ms": quantile(live, 0.99),
                              "ttft_p99_spread_ms": p99_spread(live),
                              "no_first_token_share": sum(x == float("inf") for x in live)
                              / len(live)},
                     "sim": sim, "p99_error_pct": err, "verdict": why,
                     "p99_error_pct_spread": err2, "verdict_spread": why2,
                     "p99_error_pct_shared": err3, "verdict_shared": why3})
    return calib, rows


def p99_comparison(system: str, rate: float, live_ms: float, sim_ms: float,
                   calibration: bool) -> Comparison:
    """The generation fidelity's figure: the P99 TTFT, within 20% of live."""
    return Comparison("generation", f"{system}@{rate:g}rps", "P99 TTFT ms", live_ms, sim_ms,
                      TOLERANCE, relative=True, calibration=calibration)


def _verdict(c: Comparison) -> tuple[float | None, str]:
    return (None if c.error is None else round(100 * c.error, 1)), c.why


def comparisons(runs: list[dict[str, Any]]) -> list[Comparison]:
    """Every run's rows as the headline model's comparisons (the Result's checks)."""
    return [p99_comparison(r["system"], r["rate_rps"], r["live"]["ttft_p99_ms"],
                           r["sim"][HEADLINE(r["sim"])]["ttft_p99_ms"], r["calibration"])
            for run in runs for r in run["rows"]]


def fit_run(run_path: Path, records_dir: Path, profiles: Any, measured: dict[str, Any] | None,
            pool: Any) -> dict[str, Any]:
    run = read_result(run_path)["data"]  # a Result, or a bare record from before
    if is_measured(run):  # a `measure` run: the CPU terms of its own phases
        measured = run
    out: dict[str, Any] = {"json": str(run_path), "records": str(records_dir),
                           "commit": run.get("commit"), "command": run.get("command"),
                           "loadavg_at_start": run.get("loadavg_at_start"),
                           "workload_rebuilt": {}, "calibration": {}, "rows": []}
    rates = sorted(float(r) for r in run["settings"]["rates"])
    for system in ABLATION:
        if system not in run.get("systems", {}):
            continue
        recs = {r: x for r in rates if (x := read_records(records_dir, system, r)) is not None}
        if not recs:
            log.warning("%s: no records of %s under %s", run_path, system, records_dir)
            continue
        for rate, records in recs.items():
            if f"{rate:g}" not in out["workload_rebuilt"] and pool is not None:
                out["workload_rebuilt"][f"{rate:g}"] = workload_check(run, rate, records, pool)
        log.info("%s: %s", run_path.name, system)
        calib, rows = fit_system(system, run, recs, profiles, measured)
        out["calibration"][system] = calib
        out["rows"] += rows
    return out


def is_measured(run: dict[str, Any]) -> bool:
    """Whether a run is `measure`'s (CPU time per process class in each phase)."""
    return any("phases" in v for v in run.get("systems", {}).values())


def live_only(run_path: Path, records_dir: Path) -> dict[str, Any]:
    """A live run's P99s only (no simulation): for the live figure's run-to-run spread."""
    run = read_result(run_path)["data"]  # a Result, or a bare record from before
    rows = []
    for system in ABLATION:
        for rate in sorted(float(r) for r in run["settings"]["rates"]):
            records = read_records(records_dir, system, rate)
            if records is not None and system in run.get("systems", {}):
                rows.append({"system": system, "rate_rps": rate,
                             "live": {"ttft_p99_ms": quantile(live_ttft(records), 0.99)}})
    return {"json": str(run_path), "records": str(records_dir), "commit": run.get("commit"),
            "rows": rows}

