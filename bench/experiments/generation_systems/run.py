"""The generation benchmark's run (python -m bench generation-systems parses the options): for each
system in turn, start it fresh (bench/experiments/generation_systems/systems.py), warm it up, drive the same seeded
mixed workload (bench/workloads/chat.py) at each rate of the ramp with the same open-loop
streaming client (bench/core/stream_client.py), stop it; then the figures (gen_metrics.py).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from app.sim.traces.chat_spec import ChatTrafficSpec
from bench.core import http
from bench.core.stream_client import GenRecord, Prepared, run_open_loop, run_sequential
from bench.experiments.generation_systems.metrics import (
    RunStats,
    checks,
    run_stats,
    stage_means_ms,
    stage_totals,
)
from bench.experiments.generation_systems.systems import (
    EngineBudget,
    Running,
    SystemSpec,
    log_tail,
    start,
    stop,
)
from bench.experiments.single_request.run import code_version
from bench.workloads.chat import GenRequest, describe, make_workload
from bench.workloads.chat_payloads import (
    ImageUrls,
    ModelSetup,
    body,
    headers,
    image_size_px,
    model_setup,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GenBenchSettings:
    systems: tuple[str, ...]
    rates: tuple[float, ...]  # mean requests/s of the ramp, light to past the knee
    duration_s: float = 45.0  # each rate
    slo_ms: float = 1000.0  # TTFT SLO, the same for every system
    seed: int = 0
    workload: ChatTrafficSpec = field(default_factory=lambda: ChatTrafficSpec(1.0, 1.0))
    base_port: int = 8300
    models_dir: Path = Path(".cache/models")
    model_dir: Path | None = None  # None: the shipped VLM (trained; never trained here)
    config: Path = Path("serve_config.yaml")
    num_cpus: int = 2
    encoder_replicas: int = 2
    llm_replicas: int = 1
    max_num_seqs: int = 32
    model_name: str = "vlm"
    request_timeout_s: float = 60.0
    ready_timeout_s: float = 600.0
    settle_s: float = 3.0
    stop_below_attainment: float = 0.2  # skip the system's higher rates after such a run
    extra_pythonpath: str = ""
    out_dir: Path = Path("results/generation")
    command: str = ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = json.loads(json.dumps(asdict(self), default=str))
        return d


def prepare(reqs: list[GenRequest], urls: ImageUrls, model: str) -> list[Prepared]:
    return [Prepared(r.index, r.arrival_s, body(r, urls, model), r.answer, r.task,
                     r.num_images, len(r.history), r.in_burst) for r in reqs]


def warmup_requests(setup: ModelSetup, s: GenBenchSettings) -> list[GenRequest]:
    """One text-only, one one-image and one max-image request, three times, one at a time
    (not in the ramp; the last two rounds give the idle TTFT per shape)."""
    pool = setup.pool
    fact = pool.facts[0]
    shapes = [((), "arithmetic", fact[0], fact[1]),
              ((0,), "digit", pool.digit_question, pool.digit_words[0]),
              (tuple(range(setup.max_images)), "sequence", pool.sequence_question,
               " ".join(pool.digit_words[:setup.max_images]))]
    return [GenRequest(i, 0.0, task, q, a, ids, (), s.workload.max_tokens, False)
            for i, (ids, task, q, a) in enumerate(shapes * 3)]


def idle_ttft(records: list[GenRecord]) -> dict[str, float | None]:
    """Mean TTFT per task of sequential requests (nothing else in the system)."""
    out: dict[str, float | None] = {}
    for task in sorted({r.task for r in records}):
        xs = [r.ttft_ms for r in records if r.task == task and r.ttft_ms is not None]
        out[task] = sum(xs) / len(xs) if xs else None
    return out


def wait_ready(run: Running, timeout_s: float) -> float:
    """Seconds until the server answers GET /v1/models (and, ours and Ray Serve LLM, printed
    READY); raises when the process died or the time ran out."""
    t0 = time.time()
    needs_line = run.spec.name != "vllm-serve"
    while time.time() - t0 < timeout_s:
        if run.proc.poll() is not None:
            raise RuntimeError(f"{run.spec.name} exited ({run.proc.returncode}) before ready:\n"
                               + log_tail(run))
        if not needs_line or "READY " in log_tail(run, 100_000):
            try:
                if http.get(run.spec.base_url + "/v1/models", timeout_s=5.0).status_code == 200:
                    return time.time() - t0
            except http.HttpTransportError:
                pass
        time.sleep(2.0)
    raise TimeoutError(f"{run.spec.name} not ready after {timeout_s:g} s:\n" + log_tail(run))


def _spec(name: str, port: int, s: GenBenchSettings, setup: ModelSetup) -> SystemSpec:
    budget = EngineBudget(setup.context_len, setup.max_images, s.max_num_seqs, 1, s.num_cpus,
                          s.llm_replicas, s.encoder_replicas)
    return SystemSpec(name, port, str(setup.model_dir), s.model_name, budget, s.slo_ms,
                      str(s.config), str(s.models_dir), str(s.out_dir / "logs"),
                      s.extra_pythonpath)


def _save(path: Path, records: list[GenRecord]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in records))


def run_rate(name: str, url: str, rate: float, s: GenBenchSettings, setup: ModelSetup,
             urls: ImageUrls) -> tuple[RunStats, dict[str, Any]]:
    spec = replace(s.workload, rate_rps=rate, duration_s=s.duration_s, seed=s.seed)
    reqs = make_workload(spec, setup.shape, setup.pool)
    prepared = prepare(reqs, urls, s.model_name)
    cpu0, load0 = time.process_time(), os.getloadavg()[0]
    stages0 = _stages(url)
    records = run_open_loop(url, prepared, headers(s.slo_ms), s.request_timeout_s)
    stats = run_stats(name, rate, s.duration_s, records, s.slo_ms)
    _save(s.out_dir / "records" / f"{name.replace('+', '_')}_{rate:g}.jsonl", records)
    extra = {"workload": describe(reqs), "client_cpu_s": time.process_time() - cpu0,
             "loadavg_1m_before": load0, "loadavg_1m_after": os.getloadavg()[0],
             "first_errors": [f"{r.status}: {r.error}" for r in records if not r.ok][:5],
             "stage_mean_ms": stage_means_ms(stages0, _stages(url))}
    log.info("%s @ %g rps: sent %d ok %d err %s | TTFT p50 %s p99 %s ms | attain %s | acc %s",
             name, rate, stats.sent, stats.ok, stats.errors, _r(stats.ttft_p50_ms),
             _r(stats.ttft_p99_ms), _r(stats.slo_attainment, 3), _r(stats.accuracy, 3))
    return stats, extra


def _stages(chat_url: str) -> dict[str, tuple[float, float]]:
    """Our ingress's stage timing totals (its /metrics); {} for the peers (none there)."""
    try:
        r = http.get(chat_url.rsplit("/v1/", 1)[0] + "/metrics", timeout_s=5.0)
    except http.HttpTransportError:
        return {}
    return stage_totals(r.text) if r.status_code == 200 else {}


def _r(x: float | None, nd: int = 1) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _ramp(name: str, url: str, s: GenBenchSettings, setup: ModelSetup,
          urls: ImageUrls) -> dict[str, Any]:
    ramp, runs = [], []
    for rate in s.rates:
        stats, extra = run_rate(name, url, rate, s, setup, urls)
        ramp.append(stats)
        runs.append({"stats": stats, **extra})
        if (stats.slo_attainment or 0.0) < s.stop_below_attainment:
            log.info("%s: attainment below %g at %g rps; higher rates skipped", name,
                     s.stop_below_attainment, rate)
            break
        time.sleep(s.settle_s)
    return {"ramp": ramp, "runs": runs}


def run_system(name: str, port: int, s: GenBenchSettings, setup: ModelSetup,
               urls: ImageUrls) -> dict[str, Any]:
    spec = _spec(name, port, s, setup)
    out: dict[str, Any] = {"spec": asdict(spec), "loadavg_1m_before_start": os.getloadavg()[0]}
    log.info("starting %s on port %d", name, port)
    run = start(spec)
    try:
        out["ready_s"] = wait_ready(run, s.ready_timeout_s)
        warm = run_sequential(spec.base_url + "/v1/chat/completions",
                              prepare(warmup_requests(setup, s), urls, s.model_name),
                              headers(s.slo_ms), s.request_timeout_s)
        out["warmup"] = [{"task": r.task, "status": r.status, "ttft_ms": r.ttft_ms,
                          "text": r.text, "expected": r.expected, "error": r.error}
                         for r in warm]
        out["idle_ttft_ms"] = idle_ttft(warm[3:])
        out.update(_ramp(name, spec.base_url + "/v1/chat/completions", s, setup, urls))
    except Exception as exc:
        log.error("%s failed: %s", name, exc)
        out["failed"] = f"{type(exc).__name__}: {exc}"[:4000]
    finally:
        out["stop"] = stop(run)
        out["log"] = str(run.log_path)
    return out


def ray_llm_blocker(extra_pythonpath: str) -> str | None:
    """Why Ray Serve LLM cannot run here, or None (it needs pyarrow)."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (os.environ.get("PYTHONPATH", ""), extra_pythonpath) if p)}
    r = subprocess.run([sys.executable, "-c", "import pyarrow, ray.serve.llm"],
                       capture_output=True, text=True, env=env, check=False)
    return None if r.returncode == 0 else ("Ray Serve LLM does not import: "
                                           + r.stderr.strip().splitlines()[-1][:300])


def run_bench(s: GenBenchSettings) -> dict[str, Any]:
    version = code_version()
    setup = model_setup(s.models_dir, s.model_dir)
    urls = ImageUrls(image_size_px(setup.model_dir))
    out: dict[str, Any] = {
        "command": s.command, "commit": version["commit"], "modified": version["modified"],
        "settings": s.to_dict(), "machine_cores": os.cpu_count(),
        "loadavg_at_start": os.getloadavg(), "model_dir": str(setup.model_dir),
        "model_shape": asdict(setup.shape), "systems": {}}
    for i, name in enumerate(s.systems):
        blocker = ray_llm_blocker(s.extra_pythonpath) if name == "ray-serve-llm" else None
        if blocker:
            log.warning("skipping %s: %s", name, blocker)
            out["systems"][name] = {"skipped": blocker}
            continue
        out["systems"][name] = run_system(name, s.base_port + i, s, setup, urls)
    out["loadavg_at_end"] = os.getloadavg()
    ramps = {n: v["ramp"] for n, v in out["systems"].items() if v.get("ramp")}
    out["checks"] = checks(ramps, s.slo_ms)
    return out
