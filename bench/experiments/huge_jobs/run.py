"""The "six huge jobs at once" figure in one run (python -m bench huge-jobs parses the
options; the figures are bench/experiments/huge_jobs/report.py).

On a private local Ray Serve (its own HTTP port; `serve_config.yaml`), single `/v1/classify`
requests go to every family in `single_families` (Poisson, each family at its own default SLO)
for the whole run, one timeline:

1. warm-up (not counted), then a quiet phase: the attainment each family keeps alone;
2. one phase per job kind and job SLO (bench/workloads/huge_jobs.py): `clients` clients at once
   each send a job of the largest allowed size to `job_family`, back to back for `huge_s`, plus
   one job over `http.max_items_per_job` (413 expected); the single requests go on until
   `after_s` past the latest moment a job can still be answered (its SLO, the ingress's grace);

while a thread samples the CPU time of every Serve process, so the report can tell how long
the server kept working after the last job was answered.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.sim.traces.spec import TraceSpec
from bench.core import serve as lb
from bench.core.client import LoadgenConfig, Payload, payloads_from_model, run_load_async
from bench.core.probe import Sampler, serve_cpu_s
from bench.core.run_report import write_json
from bench.experiments.adaptive_vs_static.settings import LocalServe
from bench.experiments.single_request.run import code_version
from bench.workloads.huge_jobs import JobPlan, JobRecord, job_body, job_images, run_jobs

log = logging.getLogger(__name__)
ROUTE_MARGIN_S = 1.0  # the ingress waits deadline + grace + this for a job's answer


@dataclass(frozen=True)
class HugeJobsSettings(LocalServe):
    config: Path = Path("serve_config.yaml")
    port: int = 8130  # the private Serve's HTTP port
    job_family: str = "family"
    single_families: tuple[str, ...] = ("vit", "fusion", "family")
    single_qps: float = 10.0  # per family: about half what the three sustain together
    kinds: tuple[str, ...] = ("blank", "noisy")
    job_slos_ms: tuple[float, ...] = (200.0, 5000.0)  # the family default; a batch job's
    clients: int = 6
    warmup_s: float = 5.0
    quiet_s: float = 20.0
    huge_s: float = 15.0  # each job phase: how long the clients keep sending
    after_s: float = 6.0  # single requests after the last possible job answer
    honour_retry_after: bool = True
    num_cpus: int = 8  # Ray logical CPUs
    settle_s: float = 5.0  # after the deployment, before the first request
    sample_s: float = 0.5  # CPU sampling period
    seed: int = 0
    records: Path = Path("results/huge_jobs/records.json")
    command: str = ""


@dataclass(frozen=True)
class Phase:
    name: str
    single_s: float  # how long the single requests run
    jobs: JobPlan | None = None
    kind: str | None = None
    job_slo_ms: float | None = None


@dataclass(frozen=True)
class Limits:
    """What the app allows a job (from its config)."""

    max_items_per_job: int
    max_body_bytes: int
    max_job_queue_share: float
    deadline_grace_s: float
    job_family_queue: int  # max_queued_items x replicas
    slo_ms: dict[str, float]  # each family's default SLO

    @staticmethod
    def of(args: dict[str, Any], job_family: str) -> Limits:
        from app.builder import load_config

        cfg = load_config(args)
        job = cfg.classifier(job_family)
        return Limits(cfg.http.max_items_per_job, cfg.http.max_body_bytes,
                      cfg.http.max_job_queue_share, cfg.http.deadline_grace_s,
                      job.max_queued_items * job.num_replicas,
                      {c.name: c.default_slo_ms for c in cfg.classifiers})


def plan_phases(s: HugeJobsSettings, lim: Limits) -> tuple[list[Phase], dict[str, int]]:
    """The run's phases, and the bytes of each job kind's body (for the report)."""
    phases = [Phase("warmup", s.warmup_s), Phase("quiet", s.quiet_s)]
    blank = job_images("blank", lim.max_items_per_job + 1, lim.max_body_bytes)
    sizes: dict[str, int] = {}
    for kind in s.kinds:
        images = (blank[:-1] if kind == "blank" else
                  job_images(kind, lim.max_items_per_job, lim.max_body_bytes, s.seed))
        for slo_ms in s.job_slos_ms:
            body = job_body(s.job_family, images, slo_ms)
            while len(body) > lim.max_body_bytes and len(images) > 1:
                images = images[:-1]
                body = job_body(s.job_family, images, slo_ms)
            sizes[kind] = len(body)
            plan = JobPlan(s.base_url, body, len(images), s.clients, s.huge_s,
                           job_body(s.job_family, blank, slo_ms), len(blank),
                           s.honour_retry_after)
            last_answer_s = s.huge_s + slo_ms / 1000 + lim.deadline_grace_s + ROUTE_MARGIN_S
            phases.append(Phase(f"{kind}_{slo_ms:g}ms", last_answer_s + s.after_s, plan,
                                kind, slo_ms))
    return phases, sizes


def single_configs(s: HugeJobsSettings, lim: Limits, duration_s: float,
                   seed: int) -> list[LoadgenConfig]:
    return [LoadgenConfig(url=s.base_url, model=f, slo_ms=lim.slo_ms[f], timeout_s=20.0,
                          trace=TraceSpec("poisson", s.single_qps, duration_s, seed=seed + i))
            for i, f in enumerate(s.single_families)]


async def run_phase(s: HugeJobsSettings, lim: Limits, phase: Phase, seed: int,
                    payloads: dict[str, list[Payload]]) -> dict[str, Any]:
    """The phase's single requests (records per family) and jobs, one event loop."""
    cfgs = single_configs(s, lim, phase.single_s, seed)
    origin_s = time.time() + cfgs[0].start_delay_s  # the loads' time 0 (their sent_s origin)
    loads = [run_load_async(c, payloads[c.model]) for c in cfgs]
    jobs: Any = (run_jobs(phase.jobs, origin_s) if phase.jobs is not None
                 else asyncio.sleep(0, result=([], None)))
    *results, (job_records, over_cap) = await asyncio.gather(*loads, jobs)
    return {"name": phase.name, "kind": phase.kind, "job_slo_ms": phase.job_slo_ms,
            "origin_s": origin_s, "single_s": phase.single_s,
            "jobs_until_s": origin_s + (phase.jobs.duration_s if phase.jobs else 0.0),
            "job_items": phase.jobs.items if phase.jobs else 0,
            "singles": {c.model: [r.to_dict() for r in res.records]
                        for c, res in zip(cfgs, results, strict=True)},
            "max_send_lag_ms": max(res.summary.max_send_lag_ms for res in results),
            "jobs": [r.to_dict() for r in job_records],
            "over_cap": over_cap.to_dict() if isinstance(over_cap, JobRecord) else None}


async def run_phases(s: HugeJobsSettings, lim: Limits, phases: list[Phase],
                     payloads: dict[str, list[Payload]], t0: float) -> list[dict[str, Any]]:
    out = []
    for i, phase in enumerate(phases):
        result = await run_phase(s, lim, phase, s.seed + 10 * i, payloads)
        out.append(result)
        jobs = result["jobs"]
        log.info("[%5.0f s] %s: %d single requests, %d jobs (%s)", time.time() - t0,
                 phase.name, sum(len(v) for v in result["singles"].values()), len(jobs),
                 ", ".join(f"{k} {v}" for k, v in _job_counts(jobs).items()) or "-")
    return out


def _job_counts(jobs: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for j in jobs:
        for k, v in j["outcomes"].items():
            counts[k] = counts.get(k, 0) + v
    return counts


def _payloads(s: HugeJobsSettings, lim: Limits, models_dir: str) -> dict[str, list[Payload]]:
    cfgs = single_configs(s, lim, 1.0, s.seed)
    return {c.model: payloads_from_model(c, models_dir=models_dir) for c in cfgs}


def run_huge_jobs(s: HugeJobsSettings) -> dict[str, Any]:
    """The whole benchmark: the JSON the report reads (records go to `s.records`)."""
    args = lb.serve_args(s.config)
    lim = Limits.of(args, s.job_family)
    phases, sizes = plan_phases(s, lim)
    version = code_version()
    out: dict[str, Any] = {"command": s.command, "commit": version["commit"],
                           "modified": version["modified"], "settings": s.to_dict(),
                           "limits": asdict(lim), "job_body_bytes": sizes}
    t0 = time.time()
    lb.start_ray(s.port, s.num_cpus)
    try:
        out["deploy_s"] = lb.deploy_app(args, s.base_url)
        from app.builder import load_config

        payloads = _payloads(s, lim, str(load_config(args).paths.models_dir))
        time.sleep(s.settle_s)
        with Sampler(serve_cpu_s, s.sample_s) as sampler:
            out["phases"] = asyncio.run(run_phases(s, lim, phases, payloads, t0))
        out["cpu_samples"] = sampler.samples
        out["loadavg_1min_after_run"] = os.getloadavg()[0]
    finally:
        lb.stop_ray()
    out["wall_s"] = time.time() - t0
    return out


def split_records(out: dict[str, Any], path: Path) -> dict[str, Any]:
    """Write the per-request records and the CPU samples to `path`; return the run without
    them."""
    write_json(path, {"cpu_samples": out["cpu_samples"],
                      "phases": [{k: p[k] for k in ("name", "origin_s", "singles", "jobs")}
                                 for p in out["phases"]]})
    slim = {k: v for k, v in out.items() if k != "cpu_samples"}
    slim["phases"] = [{k: v for k, v in p.items() if k not in ("singles", "jobs")}
                      for p in out["phases"]]
    slim["records"] = str(path)
    return slim
