"""Issue 11's reliability figures in one run (scripts/bench_reliability.py parses the options;
the figures are app/bench/reliability_report.py, the hostile clients
app/bench/reliability_attacks.py, the malformed set app/bench/reliability_bodies.py).

On a private local Ray Serve (its own HTTP port; `serve_config.yaml`), single `/v1/classify`
requests go to every family in `families` (Poisson, `single_qps` each, each family at its own
default SLO) in every phase, while a thread samples the RSS of the Serve proxy and ingress:

1. warm-up (not counted), then quiet: the baseline attainment and memory;
2. slowloris: `slow_clients` connections each send the head of a POST /v1/classify with a
   Content-Length of `slow_length` and then a byte a second (the edge's body read timeout
   should answer them 408); the singles run past that timeout;
3. chunked: one `chunked_mb` MB `Transfer-Encoding: chunked` body to /v1/jobs (413 expected,
   early);
4. the malformed set, one request at a time: no 5xx, a JSON error each.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.bench import live as lb
from app.bench.front import code_version
from app.bench.live_settings import LocalServe
from app.bench.loadgen import LoadgenConfig, Payload, payloads_from_model, run_load_async
from app.bench.processes import serve_memory
from app.bench.reliability_attacks import (
    chunked_upload,
    raise_fd_limit,
    send_malformed,
    slowloris,
)
from app.bench.reliability_bodies import malformed_set
from app.bench.reliability_report import memory_groups
from app.sim.traces.spec import TraceSpec

log = logging.getLogger(__name__)
PHASES = ("quiet", "slowloris", "chunked", "malformed")


@dataclass(frozen=True)
class ReliabilitySettings(LocalServe):
    config: Path = Path("serve_config.yaml")
    port: int = 8140  # the private Serve's HTTP port
    families: tuple[str, ...] = ("vit", "fusion", "family")
    single_qps: float = 10.0  # per family
    phases: tuple[str, ...] = PHASES
    warmup_s: float = 5.0
    phase_s: float = 15.0  # each phase's single requests (slowloris: at least the timeout + 10)
    slow_clients: int = 1000
    slow_length: int = 10_000  # the Content-Length the slow clients announce
    slow_period_s: float = 1.0  # one body byte per this
    chunked_mb: float = 400.0
    chunk_bytes: int = 64 * 1024
    num_cpus: int = 8  # Ray logical CPUs
    settle_s: float = 5.0  # after the deployment, before the first request
    sample_s: float = 0.5  # RSS sampling period
    seed: int = 0
    command: str = ""


class MemSampler:
    """Samples the proxy's and the ingress's RSS (MiB) every `period_s` on a thread."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            rss: dict[str, float] = {}
            for m in serve_memory():
                rss[f"{m.actor}#{m.pid}"] = m.rss_mib
            self.samples.append((time.time(), memory_groups(rss)))
            self._stop.wait(self.period_s)

    def __enter__(self) -> MemSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def single_configs(s: ReliabilitySettings, slo_ms: dict[str, float], duration_s: float,
                   seed: int) -> list[LoadgenConfig]:
    return [LoadgenConfig(url=s.base_url, model=f, slo_ms=slo_ms[f], timeout_s=20.0,
                          trace=TraceSpec("poisson", s.single_qps, duration_s, seed=seed + i))
            for i, f in enumerate(s.families)]


async def run_phase(s: ReliabilitySettings, slo_ms: dict[str, float], name: str,
                    duration_s: float, seed: int, payloads: dict[str, list[Payload]],
                    attack: Awaitable[Any] | None = None) -> dict[str, Any]:
    """The phase's single requests (records per family) beside `attack` (its result: `extra`)."""
    cfgs = single_configs(s, slo_ms, duration_s, seed)
    start_s = time.time()
    loads = [run_load_async(c, payloads[c.model]) for c in cfgs]
    *results, extra = await asyncio.gather(*loads, attack or asyncio.sleep(0))
    return {"name": name, "start_s": start_s, "end_s": time.time(), "single_s": duration_s,
            "singles": {c.model: [r.to_dict() for r in res.records]
                        for c, res in zip(cfgs, results, strict=True)},
            "max_send_lag_ms": max(res.summary.max_send_lag_ms for res in results),
            "extra": extra}


async def run_phases(s: ReliabilitySettings, slo_ms: dict[str, float],
                     payloads: dict[str, list[Payload]], read_timeout_s: float) -> dict[str, Any]:
    host = "127.0.0.1"
    out: dict[str, Any] = {"phases": []}
    await run_phase(s, slo_ms, "warmup", s.warmup_s, s.seed, payloads)
    for i, name in enumerate(p for p in s.phases if p != "malformed"):
        seed, t = s.seed + 10 * (i + 1), time.time()
        if name == "quiet":
            p = await run_phase(s, slo_ms, name, s.phase_s, seed, payloads)
        elif name == "slowloris":
            attack: Awaitable[Any] = slowloris(host, s.port, "/v1/classify", s.slow_clients, s.slow_length,
                               s.slow_period_s, read_timeout_s + 15.0)
            p = await run_phase(s, slo_ms, name, max(s.phase_s, read_timeout_s + 10.0), seed,
                                payloads, attack)
            p["slow_clients"] = [a.to_dict() for a in p.pop("extra")]
        elif name == "chunked":
            upload = chunked_upload(host, s.port, "/v1/jobs", int(s.chunked_mb * 1e6),
                                    s.chunk_bytes, 60.0)
            p = await run_phase(s, slo_ms, name, s.phase_s, seed, payloads, upload)
            p["upload"] = p.pop("extra").to_dict()
        else:
            raise ValueError(f"unknown phase {name!r}; valid: {list(PHASES)}")
        p.pop("extra", None)
        out["phases"].append(p)
        log.info("%s: %.0f s, %d single requests", name, time.time() - t,
                 sum(len(v) for v in p["singles"].values()))
    if "malformed" in s.phases:
        valid = _valid_image_body(payloads)
        answers = await send_malformed(s.base_url, malformed_set(valid))
        out["malformed"] = [a.to_dict() for a in answers]
        log.info("malformed: %d requests", len(answers))
    return out


def _valid_image_body(payloads: dict[str, list[Payload]]) -> dict[str, Any]:
    for family in ("vit", *payloads):
        if family in payloads:
            body: dict[str, Any] = json.loads(payloads[family][0].body)
            if "image" in body.get("inputs", {}):
                return body
    raise ValueError(f"no family with image inputs among {list(payloads)}")


def _limits(args: dict[str, Any]) -> tuple[dict[str, float], float, int, str]:
    """Each family's default SLO, the edge's body read timeout and body limit, models dir."""
    from app.builder import load_config
    from deployments.ingress.edge import edge_from_env

    cfg = load_config(args)
    edge = edge_from_env(os.environ)
    return ({c.name: c.default_slo_ms for c in cfg.classifiers}, edge.body_read_timeout_s,
            edge.max_body_bytes, str(cfg.paths.models_dir))


def run_reliability(s: ReliabilitySettings) -> dict[str, Any]:
    """The whole benchmark: the JSON the report reads."""
    args = lb.serve_args(s.config)
    slo_ms, read_timeout_s, max_body, models_dir = _limits(args)
    version = code_version()
    out: dict[str, Any] = {"command": s.command, "commit": version["commit"],
                           "modified": version["modified"], "settings": s.to_dict(),
                           "slo_ms": slo_ms, "body_read_timeout_s": read_timeout_s,
                           "max_body_bytes": max_body, "nofile": raise_fd_limit()}
    t0 = time.time()
    lb.start_ray(s.port, s.num_cpus)
    try:
        out["deploy_s"] = lb.deploy_app(args, s.base_url)
        cfgs = single_configs(s, slo_ms, 1.0, s.seed)
        payloads = {c.model: payloads_from_model(c, models_dir=models_dir) for c in cfgs}
        time.sleep(s.settle_s)
        with MemSampler(s.sample_s) as sampler:
            out.update(asyncio.run(run_phases(s, slo_ms, payloads, read_timeout_s)))
        out["rss_samples"] = sampler.samples
        out["loadavg_1min_after_run"] = os.getloadavg()[0]
    finally:
        lb.stop_ray()
    out["wall_s"] = time.time() - t0
    return out
