"""The reliability figures in one run (python -m bench reliability parses the options;
the phases are bench/experiments/reliability/phases.py, the figures bench/experiments/reliability/report.py,
the hostile clients bench/workloads/hostile_clients.py, the kills bench/experiments/reliability/kills.py,
the malformed set bench/workloads/hostile_bodies.py).

On a private local Ray Serve (its own HTTP port; `serve_config.yaml`), single `/v1/classify`
requests go to every family in `families` (Poisson, `single_qps` each, each family at its own
default SLO) in every phase, while a thread samples the RSS of the Serve proxy, the ingress and
each classifier deployment. After a warm-up (not counted), the phases run in ALL_PHASES's order:

1. quiet: the baseline attainment and memory;
2. slowloris: `slow_clients` connections each send the head of a POST /v1/classify with a
   Content-Length of `slow_length` and then a byte a second (the edge's body read timeout
   should answer them 408); the singles run past that timeout;
3. slow_headers: `slow_header_clients` connections send a request line and headers, then a
   header byte a second, never finishing the headers, for `slow_header_s`;
4. chunked: one `chunked_mb` MB `Transfer-Encoding: chunked` body to /v1/jobs (413 expected,
   early);
5. the malformed set, one request at a time: no 5xx, a JSON error each;
6. kill_classifier / kill_controller: a classifier replica / the controller killed by pid
   under the singles (every request answered once, fast 503s, time to recover);
7. soak (only when asked): one family at `soak_load` x its measured capacity for `soak_s`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import Any

from app.sim.traces.spec import TraceSpec
from bench.core import serve as lb
from bench.core.client import LoadgenConfig, Payload, payloads_from_model
from bench.core.probe import Sampler, serve_memory
from bench.experiments.reliability.phases import PhaseContext, run_phase, runner, soak_family
from bench.experiments.reliability.settings import ALL_PHASES, PHASES, ReliabilitySettings
from bench.experiments.reliability.stats import rss_groups
from bench.experiments.single_request.run import code_version
from bench.workloads.hostile_bodies import malformed_set
from bench.workloads.hostile_clients import raise_fd_limit, send_malformed

__all__ = ["PHASES", "ALL_PHASES", "ReliabilitySettings", "run_reliability"]
log = logging.getLogger(__name__)
def memory_and_load() -> tuple[dict[str, float], float]:
    """The RSS (MiB) of the proxy, the ingress and each classifier deployment, and the
    machine's 1-minute load average."""
    rss = {f"{m.actor}#{m.pid}": m.rss_mib for m in serve_memory()}
    return rss_groups(rss), os.getloadavg()[0]


async def run_phases(c: PhaseContext) -> dict[str, Any]:
    s = c.s
    out: dict[str, Any] = {"phases": []}
    await run_phase(c, "warmup", s.warmup_s, s.seed)
    for i, name in enumerate(p for p in ALL_PHASES if p in s.phases):
        seed, t = s.seed + 10 * (i + 1), time.time()
        if name == "malformed":
            answers = await send_malformed(s.base_url, malformed_set(_valid_image_body(c.payloads)))
            out["malformed"] = [a.to_dict() for a in answers]
            log.info("malformed: %d requests", len(answers))
            continue
        p = await runner(name)(c, seed)
        p.pop("extra", None)
        out["phases"].append(p)
        log.info("%s: %.0f s, %d single requests", name, time.time() - t,
                 sum(len(v) for v in p["singles"].values()))
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
    from deployments.ingress.proxy.edge import edge_from_env

    cfg = load_config(args)
    edge = edge_from_env(os.environ)
    return ({c.name: c.default_slo_ms for c in cfg.classifiers}, edge.body_read_timeout_s,
            edge.max_body_bytes, str(cfg.paths.models_dir))


def _payload_families(s: ReliabilitySettings) -> list[str]:
    """The families whose requests the phases send."""
    out = list(s.families)
    if "kill_classifier" in s.phases:
        out.append(s.kill_family)
    if "soak" in s.phases:
        out.append(soak_family(s))
    return sorted(set(out), key=out.index)


def _config(s: ReliabilitySettings, family: str, slo_ms: dict[str, float]) -> LoadgenConfig:
    return LoadgenConfig(url=s.base_url, model=family, slo_ms=slo_ms[family],
                         trace=TraceSpec("poisson", 1.0, 1.0))


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
        payloads = {f: payloads_from_model(_config(s, f, slo_ms), models_dir=models_dir)
                    for f in _payload_families(s)}
        time.sleep(s.settle_s)
        ctx = PhaseContext(s, slo_ms, payloads, read_timeout_s)
        with Sampler(memory_and_load, s.sample_s) as sampler:
            out.update(asyncio.run(run_phases(ctx)))
        out["rss_samples"] = [(t, rss) for t, (rss, _) in sampler.samples]
        out["loadavg_samples"] = [(t, load) for t, (_, load) in sampler.samples]
        out["loadavg_1min_after_run"] = os.getloadavg()[0]
    finally:
        lb.stop_ray()
    out["wall_s"] = time.time() - t0
    return out
