"""One run of the autoscaling burst demonstration (bench/experiments/autoscaling/burst.py has the
pieces): Ray up, the app deployed from the config, one warm request per path, the sampler and
the open-loop client over the whole schedule, the server's answer count before and after, Ray
down."""

from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.core.stream_client import GenRecord, open_loop, run_sequential
from bench.experiments.autoscaling import burst as ab
from bench.workloads.chat_payloads import ImageUrls, headers, image_size_px, model_setup

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DemoRun:
    records: list[GenRecord]
    samples: list[dict[str, Any]]
    answered_by_server: int  # chat answers the ingress counted during the run
    deploy_s: float
    capacities: dict[str, Any]  # what the policies were configured with
    encode_latency_s: float | None
    config: dict[str, Any]


def capacities_of(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Each stage's capacity/replica as its decisions report it."""
    out: dict[str, Any] = {}
    for s in samples:
        for name, d in (s.get("decisions") or {}).items():
            out.setdefault(name, d.get("capacity_per_s"))
    return out


def _client(url: str, prepared: list[Any], slo_ms: float, t_start: float) -> list[GenRecord]:
    import asyncio

    async def go() -> list[GenRecord]:
        delay = t_start - time.time()
        return await open_loop(url + "/v1/chat/completions", prepared, headers(slo_ms),
                               timeout_s=60.0, start_delay_s=max(0.0, delay))
    return asyncio.run(go())


def run_demo(spec: ab.BurstSpec, scaling: ab.DemoScaling, config_path: Path, port: int,
             num_cpus: int, models_dir: Path, deploy_timeout_s: float = 600.0,
             after_s: float = 5.0, model_dir: Path | None = None) -> DemoRun:
    from bench.core.serve import start_ray, stop_ray

    # the trained VLM in models_dir unless model_dir names another (the tests' tiny VLM); errors
    # (no trained VLM) before Ray starts
    setup = model_setup(models_dir, model_dir)
    if scaling.llm_capacity_per_s is None:
        from profiling.paths import DEFAULT_PROFILES_DIR, REPO_ROOT, stage_profile_file

        if not stage_profile_file(REPO_ROOT / DEFAULT_PROFILES_DIR, "vlm").is_file():
            raise FileNotFoundError("no stage profile for the LLM's capacity: run `adaptserve "
                                    "profile --stages` or pass --llm-capacity")
    urls = ImageUrls(image_size_px(setup.model_dir))
    prepared = ab.burst_requests(spec, setup, urls, "vlm")
    doc = ab.demo_config(yaml.safe_load(Path(config_path).read_text()), port, scaling,
                         ab.model_dir_of(setup))
    url = f"http://127.0.0.1:{port}"
    start_ray(port, num_cpus, temp_dir=tempfile.mkdtemp(prefix="autoscale-"))
    try:
        ab.deploy(doc)
        deploy_s = ab.wait_running(url, deploy_timeout_s)
        warm = ab.warm_requests(setup, urls, "vlm", spec.max_tokens)
        run_sequential(url + "/v1/chat/completions", warm, headers(spec.slo_ms), 120.0)
        time.sleep(scaling.rate_window_s + scaling.look_back_period_s)  # its load has passed
        before = ab.chat_answers(url)
        sampler = ab.Sampler(url)
        t_start = time.time() + 1.0
        sampler.start(t_start)
        records = _client(url, prepared, spec.slo_ms, t_start)
        time.sleep(after_s)
        samples = sampler.stop()
        answered = ab.chat_answers(url) - before
        latency = ab.encode_latency_s()
    finally:
        stop_ray()
    return DemoRun(records, samples, answered, deploy_s, capacities_of(samples), latency, doc)
