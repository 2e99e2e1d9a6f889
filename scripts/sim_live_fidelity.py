"""The generation simulator against the live system (issue 13, "Fidelity"; docs/sim_generation.md,
"Fidelity to the live system"): the live runs of the generation benchmark rebuilt in the simulator
(app/sim/generation/live_fit.py) with this machine's stage profile, the live path's costs measured
at the lowest load only, every other load predicted.

    # the figure: table + docs/data_sim_live_fidelity.json + docs/figures/sim_live_fidelity.png
    .venv/bin/python scripts/sim_live_fidelity.py \\
        --run docs/data_generation.json=/tmp/gb2/results/generation/records \\
        --run docs/data_sim_live_run.json=results/sim_live/records
    # a dedicated live run with CPU accounting per process (the machine lock; ~9 min)
    RAY_AUTH_MODE=disabled flock /tmp/live.lock .venv/bin/python scripts/sim_live_fidelity.py \\
        measure --systems monolith full --rates 4 16 28

`--run JSON=RECORDS`: a benchmark's JSON (scripts/bench_generation.py's, or `measure`'s) and the
directory of its per-request records (`<system>_<rate>.jsonl`, app/bench/gen_bench.py `_save`).
`--burst` (default docs/data_autoscale_burst.json, when it exists): the autoscaling burst demo
replayed in the simulator (replica counts over time).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

log = logging.getLogger("sim_live_fidelity")

# process -> class, by the first of these found in its command line (Ray and vLLM name them)
CLASSES = (("VLLM::Worker", "engine_worker"), ("VLLM::EngineCor", "engine_core"),
           ("LLMBackend", "llm_replica"), ("ImageEncoder", "encoder"), ("Ingress", "ingress"),
           ("ProxyActor", "proxy"), ("Classifier", "classifier"), ("raylet", "ray"),
           ("gcs_server", "ray"))
ENGINE_CLASSES = ("engine_worker", "engine_core")  # what the stage profile's LLM times are


# ---- measure: a live run with CPU accounting -----------------------------------------------------
def _classify(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace") + " " + Path(f"/proc/{pid}/comm").read_text()
    except OSError:
        return "gone"
    return next((cls for key, cls in CLASSES if key in cmd), "other")


def _cpu_ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12])  # utime + stime


def cpu_snapshot(root: int, token: str) -> dict[int, tuple[str, float]]:
    """{pid: (class, CPU seconds so far)} of a running system's processes."""
    from app.bench.gen_systems import tree

    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in tree(root, token):
        ticks = _cpu_ticks(pid)
        if ticks is not None:
            out[pid] = (_classify(pid), ticks / tick)
    return out


def machine_cpu_s() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far (/proc/stat)."""
    vals = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    idle = vals[3] + vals[4]
    return (sum(vals[:8]) - idle) / tick, sum(vals[:8]) / tick


def cpu_by_class(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]
                 ) -> dict[str, float]:
    out: dict[str, float] = {}
    for pid, (cls, cpu) in after.items():
        prev = before.get(pid)
        used = cpu - prev[1] if prev is not None and prev[0] == cls else cpu
        out[cls] = out.get(cls, 0.0) + max(0.0, used)
    return {k: round(v, 3) for k, v in sorted(out.items())}


def measured_phase(name: str, root: int, token: str, fn: Callable[[], Any]) -> dict[str, Any]:
    """Run fn; the CPU each class of the system's processes, the client (this process) and the
    whole machine used meanwhile."""
    snap0, (busy0, total0) = cpu_snapshot(root, token), machine_cpu_s()
    client0, t0, load0 = time.process_time(), time.time(), os.getloadavg()[0]
    result = fn()
    wall = time.time() - t0
    snap1, (busy1, total1) = cpu_snapshot(root, token), machine_cpu_s()
    return {"phase": name, "wall_s": round(wall, 3), "cpu_s": cpu_by_class(snap0, snap1),
            "client_cpu_s": round(time.process_time() - client0, 3),
            "machine_busy_s": round(busy1 - busy0, 3),
            "machine_cores": round((total1 - total0) / wall, 2) if wall > 0 else None,
            "loadavg_1m_before": load0, "result": result}


def measure_system(name: str, port: int, s: Any, setup: Any, urls: Any,
                   idle_s: float) -> dict[str, Any]:
    from app.bench.gen_bench import idle_ttft, prepare, run_rate, wait_ready, warmup_requests
    from app.bench.gen_client import run_sequential
    from app.bench.gen_payloads import headers
    from app.bench.gen_systems import EngineBudget, SystemSpec, start, stop

    budget = EngineBudget(setup.context_len, setup.max_images, s.max_num_seqs, 1, s.num_cpus,
                          s.llm_replicas, s.encoder_replicas)
    spec = SystemSpec(name, port, str(setup.model_dir), s.model_name, budget, s.slo_ms,
                      str(s.config), str(s.models_dir), str(s.out_dir / "logs"))
    out: dict[str, Any] = {"spec": asdict(spec), "loadavg_1m_before_start": os.getloadavg()[0]}
    run = start(spec)
    url = spec.base_url + "/v1/chat/completions"
    try:
        out["ready_s"] = wait_ready(run, s.ready_timeout_s)
        warm = run_sequential(url, prepare(warmup_requests(setup, s), urls, s.model_name),
                              headers(s.slo_ms), s.request_timeout_s)
        out["idle_ttft_ms"] = idle_ttft(warm[3:])
        phases = [measured_phase("idle", run.proc.pid, run.token, lambda: time.sleep(idle_s))]
        for rate in s.rates:
            def drive(rate: float = rate) -> dict[str, Any]:
                stats, extra = run_rate(name, url, rate, s, setup, urls)
                return {"stats": asdict(stats), **extra}
            phases.append(measured_phase(f"rate {rate:g}", run.proc.pid, run.token, drive))
            time.sleep(s.settle_s)
        out["phases"] = phases
        out["ramp"] = [p["result"]["stats"] for p in phases[1:]]
    except Exception as exc:  # a failed system is reported, the others still run
        log.error("%s failed: %s", name, exc)
        out["failed"] = f"{type(exc).__name__}: {exc}"[:4000]
    finally:
        out["stop"] = stop(run)
    return out


def write_json(path: Path, data: Any) -> None:
    from app.bench.loadgen_report import write_json as strict

    strict(path, data)


def measure(a: argparse.Namespace) -> int:
    from app.bench.front import code_version
    from app.bench.gen_bench import GenBenchSettings
    from app.bench.gen_payloads import ImageUrls, image_size_px, model_setup
    from app.bench.gen_workload import WorkloadSpec

    base = json.loads(a.like.read_text())["settings"]
    workload = WorkloadSpec(**base["workload"])
    s = GenBenchSettings(tuple(a.systems), tuple(a.rates), a.duration_s, base["slo_ms"],
                         base["seed"], workload, a.base_port, Path(base["models_dir"]), None,
                         Path(base["config"]), base["num_cpus"], base["encoder_replicas"],
                         base["llm_replicas"], base["max_num_seqs"], out_dir=a.results,
                         command=" ".join(sys.argv))
    setup = model_setup(s.models_dir, s.model_dir)
    urls = ImageUrls(image_size_px(setup.model_dir))
    version = code_version()
    out: dict[str, Any] = {"command": s.command, "commit": version["commit"],
                           "modified": version["modified"], "settings": s.to_dict(),
                           "machine_cores": os.cpu_count(), "loadavg_at_start": os.getloadavg(),
                           "model_shape": asdict(setup.shape), "idle_s": a.idle_s,
                           "classes": dict(CLASSES), "systems": {}}
    for i, name in enumerate(s.systems):
        log.info("measuring %s", name)
        out["systems"][name] = measure_system(name, s.base_port + i, s, setup, urls, a.idle_s)
        write_json(a.out, out)  # partial results survive
    out["loadavg_at_end"] = os.getloadavg()
    write_json(a.out, out)
    print(f"wrote {a.out}; records under {a.results / 'records'}")
    return 0 if not any(v.get("failed") for v in out["systems"].values()) else 1


# ---- the fit: live runs rebuilt in the simulator ---------------------------------------------
ABLATION = {  # app/bench/gen_systems.py ABLATION, as simulator settings
    "monolith": ("monolith", "least_requests", "fifo"),
    "decoupled": ("disaggregated", "least_requests", "fifo"),  # pow2 of 2 = the less loaded
    "decoupled+priority": ("disaggregated", "least_requests", "deadline"),
    "full": ("disaggregated", "tokens", "deadline"),
}
MAX_PREFILL_TOKENS = 2048  # vLLM's chunked-prefill budget per step
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
    """The live prompt's token counts (the benchmark's ModelShape: its tokens_per_image is an
    upper bound, one more than the template adds: checked against the records in the tests)."""
    from app.sim.generation.live_fit import PromptShape

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
    from app.bench.gen_workload import ModelShape, WorkloadSpec, make_workload

    s = run["settings"]
    spec = replace(WorkloadSpec(**s["workload"]), rate_rps=rate, duration_s=s["duration_s"],
                   seed=s["seed"])
    reqs = make_workload(spec, ModelShape(**run["model_shape"]), pool)
    return len(reqs) == len(records) and all(
        abs(a.arrival_s - b["scheduled_s"]) < 1e-9 and a.num_images == b["num_images"]
        and len(a.history) == b["history_turns"] for a, b in zip(reqs, records, strict=True))


def sim_requests(records: list[dict[str, Any]], shape: Any) -> list[Any]:
    from app.sim.generation.live_fit import LiveRequest, live_requests

    return live_requests([LiveRequest(r["scheduled_s"], r["num_images"], r["history_turns"],
                                      r.get("prompt_tokens"), r.get("completion_tokens"))
                          for r in records], shape)


def calibrate(records: list[dict[str, Any]], cfg: Any, profiles: Any, shape: Any
              ) -> tuple[Any, list[float]]:
    """Path costs from the lowest load's requests (live_fit.fit_path_costs), and what they
    leave unexplained per request there."""
    import numpy as np

    from app.sim.generation.live_fit import fit_path_costs, image_hops, residuals
    from app.sim.generation.sim import simulate

    reqs = sim_requests(records, shape)
    core = simulate(reqs, profiles, cfg).ttft_ms()
    core_ms = np.where(np.isnan(core), np.inf, core).tolist()
    images = [r.num_images for r in reqs]
    hops = [image_hops(m, cfg) for m in images]
    costs = fit_path_costs(live_ttft(records), core_ms, images, hops)
    return costs, residuals(live_ttft(records), core_ms, images, hops, costs).tolist()


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
    from app.sim.generation.live_fit import image_hops

    lat = [costs.latency_ms(r["num_images"], image_hops(r["num_images"], cfg)) for r in records]
    share = terms["path_cpu_ms_per_request"] / (sum(lat) / len(lat))
    return replace(costs, cpu_share=share, host_cores=terms["host_cores"],
                   competitors=terms["competitors"])


def quantile(values: Any, q: float) -> float:
    import numpy as np

    return float(np.quantile(np.asarray(values, float), q, method="inverted_cdf"))


def p99_spread(ttft: list[float], draws: int = 500) -> list[float]:
    """5th and 95th percentile of the P99 over bootstrap resamples of the requests."""
    import numpy as np

    x = np.asarray(ttft, float)
    rng = np.random.default_rng(0)
    p99 = [quantile(x[rng.integers(0, x.size, x.size)], 0.99) for _ in range(draws)]
    return [quantile(p99, 0.05), quantile(p99, 0.95)]


def verdict(live: float, sim: float, tolerance: float = 0.2) -> tuple[float | None, str]:
    inf = float("inf")
    if live == inf and sim == inf:
        return None, "both saturated (>1% without a first token)"
    if live == inf:
        return None, "live saturated, sim not"
    if sim == inf:
        return None, "sim saturated, live not"
    err = (sim - live) / live
    return round(100 * err, 1), "within 20%" if abs(err) <= tolerance else "outside 20%"


def predict(records: list[dict[str, Any]], cfg: Any, profiles: Any, shape: Any,
            variants: dict[str, Any], spread_ms: list[float]) -> dict[str, Any]:
    """Each variant's simulated TTFT; "+spread": the headline's costs plus, per request, a
    draw from the calibration load's unexplained residuals."""
    from app.sim.generation.live_fit import simulate_live, spread_draws

    reqs = sim_requests(records, shape)
    out = {}
    for name, costs in variants.items():
        extra = spread_draws(spread_ms, len(reqs)) if name.endswith("+spread") else None
        s = simulate_live(reqs, profiles, cfg, costs, extra).summary()
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
    """The model the verdicts judge: the shared-core one where CPU was measured."""
    return "shared" if "shared" in variants else "path"


def fit_system(system: str, run: dict[str, Any], recs: dict[float, list[dict[str, Any]]],
               profiles: Any, measured: dict[str, Any] | None) -> tuple[dict[str, Any], list]:
    from app.sim.generation.live_fit import PathCosts

    settings = run["settings"]
    shape = prompt_shape(run["model_shape"], profiles)
    low = min(recs)
    cfg = sim_config(system, settings)
    costs, spread = calibrate(recs[low], cfg, profiles, shape)
    terms, source = cpu_source(measured, system, low)
    variants = {"stages": PathCosts(), "path": costs}
    if terms is not None:
        variants["shared"] = with_cpu(costs, recs[low], cfg, terms)
    variants[HEADLINE(variants) + "+spread"] = variants[HEADLINE(variants)]
    calib = {"calibration_rate_rps": low, "path_costs": asdict(variants[HEADLINE(variants)]),
             "cpu_terms": terms, "cpu_terms_from": source,
             "residual_ms": {"p50": quantile(spread, 0.5), "p90": quantile(spread, 0.9),
                             "p99": quantile(spread, 0.99), "max": max(spread)}}
    rows = []
    for rate in sorted(recs):
        live = live_ttft(recs[rate])
        sim = predict(recs[rate], cfg, profiles, shape, variants, spread)
        best = sim[HEADLINE(sim)]
        err, why = verdict(quantile(live, 0.99), best["ttft_p99_ms"])
        err2, why2 = verdict(quantile(live, 0.99),
                             sim[HEADLINE(sim) + "+spread"]["ttft_p99_ms"])
        rows.append({"system": system, "rate_rps": rate, "calibration": rate == low,
                     "requests": len(live),
                     "live": {"ttft_p50_ms": quantile(live, 0.5),
                              "ttft_p99_ms": quantile(live, 0.99),
                              "ttft_p99_spread_ms": p99_spread(live),
                              "no_first_token_share": sum(x == float("inf") for x in live)
                              / len(live)},
                     "sim": sim, "p99_error_pct": err, "verdict": why,
                     "p99_error_pct_spread": err2, "verdict_spread": why2})
    return calib, rows


def fit_run(run_path: Path, records_dir: Path, profiles: Any, measured: dict[str, Any] | None,
            pool: Any) -> dict[str, Any]:
    run = json.loads(run_path.read_text())
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


def live_only(run_path: Path, records_dir: Path) -> dict[str, Any]:
    """A live run's P99s only (no simulation): for the live figure's run-to-run spread."""
    run = json.loads(run_path.read_text())
    rows = []
    for system in ABLATION:
        for rate in sorted(float(r) for r in run["settings"]["rates"]):
            records = read_records(records_dir, system, rate)
            if records is not None and system in run.get("systems", {}):
                rows.append({"system": system, "rate_rps": rate,
                             "live": {"ttft_p99_ms": quantile(live_ttft(records), 0.99)}})
    return {"json": str(run_path), "records": str(records_dir), "commit": run.get("commit"),
            "rows": rows}


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
BURST_OFFSET_S = 5.0  # the simulation's clock = the demo's + this (room for the warm-up)
# the demo's warm-up before its t = 0 (app/bench/autoscale_run.py: the first image request, then
# the first text request, one at a time, then t = 0 a second later); not recorded: estimated
# from the requests' latencies (~0.2 s and ~0.03 s) and the 1 s lead
WARMUP_AT_S = (-1.3, -1.1)


def burst_live_requests(demo: dict[str, Any], warmup: bool) -> list[Any]:
    from app.sim.generation.live_fit import LiveRequest

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
    from app.sim.generation.live_fit import live_requests
    from app.sim.generation.live_replay import (
        LiveMeteredSim,
        ServeAutoscaler,
        ServeTiming,
        compare_counts,
        measured_startup_s,
        replay,
    )
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
                     f"{'sim P99':>7} {'err %':>6} {'+spread':>7} {'err %':>6}  verdict")
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
                f"{_pct(r['p99_error_pct_spread']):>6}  "
                f"{'(calibration) ' if r['calibration'] else ''}{r['verdict']} | "
                f"+spread: {r['verdict_spread']}")
    return "\n".join(lines)


def plot(runs: list[dict[str, Any]], burst: dict[str, Any] | None, demo: dict[str, Any] | None,
         path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [r for run in runs for r in run["rows"] if not r["calibration"]]
    out: dict[str, Any] = {"predicted_rows": len(rows)}
    for key in ("verdict", "verdict_spread"):
        counts: dict[str, int] = {}
        for r in rows:
            counts[r[key]] = counts.get(r[key], 0) + 1
        out["by_" + key] = counts
    return out


def fit_main(a: argparse.Namespace) -> int:
    from app.bench.gen_payloads import example_pool
    from profiling.stages import load_stage_profiles

    profiles = load_stage_profiles(a.profile)
    measured = json.loads(a.measured.read_text()) if a.measured.is_file() else None
    pool = None if a.no_workload_check else example_pool()
    runs = []
    for spec in a.run:
        run_json, _, records = spec.partition("=")
        runs.append(fit_run(Path(run_json), Path(records), profiles, measured, pool))
    extra = []
    for spec in a.also_live:
        run_json, _, records = spec.partition("=")
        extra.append(live_only(Path(run_json), Path(records)))
    burst = demo = None
    if a.burst.is_file():
        demo = json.loads(a.burst.read_text())
        costs = next((run["calibration"]["full"]["path_costs"] for run in reversed(runs)
                      if "full" in run["calibration"]), None)
        if costs is not None:
            from app.sim.generation.live_fit import PathCosts

            burst = burst_replay(demo, profiles, PathCosts(**costs), warmup=False)
            burst["with_warmup"] = burst_replay(demo, profiles, PathCosts(**costs),
                                                warmup=True)["compare"]
    print(table(runs))
    out = {"command": " ".join(["scripts/sim_live_fidelity.py", *sys.argv[1:]]),
           "profile": str(a.profile), "measured": str(a.measured) if measured else None,
           "runs": runs, "summary": summary(runs),
           "live_only_runs": [{k: v for k, v in x.items() if k != "rows"} for x in extra],
           "run_to_run": run_to_run(runs + extra),
           "burst": burst}
    if burst:
        print("\nburst demo replayed:", json.dumps(burst["compare"], indent=1))
        print("with the warm-up requests:", json.dumps(burst["with_warmup"]["encoder"]))
        print("TTFT ms:", burst["ttft_ms"])
    print("\nrun to run:", json.dumps(out["run_to_run"], indent=1))
    print("summary:", out["summary"])
    write_json(a.out, out)  # strict JSON: inf (no first token) is null
    plot(runs, burst, demo, a.png)
    print(f"wrote {a.out} and {a.png}")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", action="append", default=[], metavar="JSON=RECORDS",
                   help="a live run and its per-request records (repeatable)")
    p.add_argument("--also-live", action="append", default=[], metavar="JSON=RECORDS",
                   help="another live run of the same workload, for the live P99's run-to-run "
                        "spread only (repeatable)")
    p.add_argument("--measured", type=Path, default=ROOT / "docs/data_sim_live_run.json",
                   help="the `measure` run's CPU accounting")
    p.add_argument("--profile", type=Path, default=ROOT / "docs/data_stage_profile.json")
    p.add_argument("--burst", type=Path, default=ROOT / "docs/data_autoscale_burst.json")
    p.add_argument("--out", type=Path, default=ROOT / "docs/data_sim_live_fidelity.json")
    p.add_argument("--png", type=Path, default=ROOT / "docs/figures/sim_live_fidelity.png")
    p.add_argument("--no-workload-check", action="store_true",
                   help="skip rebuilding the workloads from the runs' settings (25 s)")
    sub = p.add_subparsers(dest="cmd")
    m = sub.add_parser("measure", help="a live run with CPU accounting (needs the lock)")
    m.add_argument("--systems", nargs="+", default=["monolith", "full"])
    m.add_argument("--rates", type=float, nargs="+", default=[4.0, 16.0, 28.0])
    m.add_argument("--duration-s", type=float, default=25.0)
    m.add_argument("--idle-s", type=float, default=15.0)
    m.add_argument("--base-port", type=int, default=8350)
    m.add_argument("--like", type=Path, default=ROOT / "docs/data_generation.json",
                   help="the benchmark run whose settings and workload to repeat")
    m.add_argument("--results", type=Path, default=Path("results/sim_live"))
    m.add_argument("--out", type=Path, default=ROOT / "docs/data_sim_live_run.json")
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    logging.getLogger("app.bench").setLevel(logging.INFO)
    log.setLevel(logging.INFO)
    a = _parser().parse_args(argv)
    if a.cmd == "measure":
        return measure(a)
    if not a.run:
        a.run = [f"{ROOT / 'docs/data_generation.json'}=results/generation/records"]
    return fit_main(a)


if __name__ == "__main__":
    sys.exit(main())
