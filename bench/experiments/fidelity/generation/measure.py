"""python -m bench fidelity generation `measure`: a live generation run with CPU accounting per process
(Ray and vLLM processes classed by their command lines), the cores the fit's contention model
reads."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.core.cli import settings_of
from bench.core.result import Run, read_result

log = logging.getLogger(__name__)

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
    from bench.experiments.generation_systems.systems import tree

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
    from bench.core.stream_client import run_sequential
    from bench.experiments.generation_systems.run import (
        idle_ttft,
        prepare,
        run_rate,
        wait_ready,
        warmup_requests,
    )
    from bench.experiments.generation_systems.systems import EngineBudget, SystemSpec, start, stop
    from bench.workloads.chat_payloads import headers

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
    from bench.core.run_report import write_json as strict

    strict(path, data)


def measure(a: argparse.Namespace) -> int:
    from app.sim.traces.chat_spec import ChatTrafficSpec
    from bench.experiments.generation_systems.run import GenBenchSettings
    from bench.experiments.single_request.run import code_version
    from bench.workloads.chat_payloads import ImageUrls, image_size_px, model_setup

    run = Run()
    base = read_result(a.like)["data"]["settings"]  # the benchmark's own settings
    workload = ChatTrafficSpec(**base["workload"])
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
    run.write(a.out, out, settings=settings_of(a))
    print(f"wrote {a.out}; records under {a.results / 'records'}")
    return 0 if not any(v.get("failed") for v in out["systems"].values()) else 1


