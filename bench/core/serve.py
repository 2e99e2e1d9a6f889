"""Plumbing of the live benchmark (python -m bench adaptive-vs-static): a private local Ray + Serve on its
own HTTP port, (re)deploying the app with overrides, the bare graph, and the profile's capacity
estimate (replica memory and CPU: bench/core/probe.py). Nothing here decides what is
measured."""

from __future__ import annotations

import copy
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.core.wait import wait_http_ok
from deployments.config import CLUSTER_ENV, PROXY_CALLBACK_ENV
from policies.profile import LatencyModel, Profile

log = logging.getLogger(__name__)
APP_NAME = "adaptserve"


def serve_args(config_path: Path, app_name: str | None = None) -> dict[str, Any]:
    """The `args` of the application in a Serve config file (first one unless named)."""
    data = yaml.safe_load(Path(config_path).read_text())
    apps = data.get("applications") or [data]
    for a in apps:
        if app_name is None or a.get("name") == app_name:
            return copy.deepcopy(a.get("args") or {})
    raise ValueError(f"application {app_name!r} not in {config_path}")


def _classifier(args: dict[str, Any], family: str) -> dict[str, Any]:
    classifiers: list[dict[str, Any]] = args["classifiers"]
    for c in classifiers:
        if c["name"] == family:
            return c
    names = [c["name"] for c in classifiers]
    raise ValueError(f"classifier {family!r} not in the config; valid: {names}")


def with_classifier(args: dict[str, Any], family: str, **changes: Any) -> dict[str, Any]:
    """A copy of the app args with one classifier's settings changed."""
    out = copy.deepcopy(args)
    _classifier(out, family).update(changes)
    return out


def classifier_args(args: dict[str, Any], family: str) -> dict[str, Any]:
    return dict(_classifier(args, family))


def start_ray(port: int, num_cpus: int, temp_dir: str | None = None,
              front_door: bool = True) -> None:
    """A fresh local Ray instance (never someone else's cluster) and Serve on `port`;
    `temp_dir`: Ray's session files there instead of under /tmp/ray; `front_door`: the app's
    admission middleware in the HTTP proxy (False: Serve's own proxy, for its floor)."""
    import ray
    from ray import serve

    os.environ.pop("RAY_ADDRESS", None)
    os.environ.update(CLUSTER_ENV)  # read by the Serve processes Ray starts
    if not front_door:
        os.environ.pop(PROXY_CALLBACK_ENV, None)
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
             log_to_driver=False, logging_level=logging.WARNING, _temp_dir=temp_dir)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
    except BaseException:
        ray.shutdown()  # a failed start leaves no Ray behind for the caller's next init
        raise


def stop_ray() -> None:
    import ray
    from ray import serve

    if not ray.is_initialized():  # start_ray failed and cleaned up: never attach to another Ray
        return
    try:
        serve.shutdown()
    finally:
        ray.shutdown()


def wait_healthy(url: str, timeout_s: float = 300.0) -> None:
    wait_http_ok(url, timeout_s)


def deploy(application: Any, name: str, route_prefix: str, health_url: str) -> float:
    """Deploy a bound Serve application under `route_prefix` and wait for `health_url`;
    returns seconds taken."""
    from ray import serve

    t = time.perf_counter()
    serve.run(application, name=name, route_prefix=route_prefix, blocking=False)
    wait_healthy(health_url)
    return time.perf_counter() - t


def delete(name: str) -> None:
    from ray import serve

    serve.delete(name)


def deploy_app(args: dict[str, Any], base_url: str) -> float:
    """(Re)deploy the app under "/" and wait for /healthz; returns seconds taken."""
    from app.builder import build_app

    return deploy(build_app(args), APP_NAME, "/", base_url + "/healthz")


@dataclass(frozen=True)
class CapacityEstimate:
    variant: str
    batch_size: int
    batch_latency_ms: float
    qps: float  # all replicas


def profile_capacity(profile: Profile, variant: str, slo_ms: float, percentile: str,
                     max_batch_size: int, replicas: int) -> CapacityEstimate:
    """Throughput of `variant` at the batch size maximizing b / latency(b) among those with
    2 x latency(b) <= SLO (an item may wait one batch, then run in the next), times replicas."""
    model = LatencyModel.from_profile(profile, percentile, max_batch_size)
    i = model.index(variant)
    best = CapacityEstimate(variant, 1, 1000 * model.latency(i, 1),
                            replicas / model.latency(i, 1))
    for b in range(1, max_batch_size + 1):
        lat = model.latency(i, b)
        if 2 * lat * 1000 <= slo_ms and replicas * b / lat > best.qps:
            best = CapacityEstimate(variant, b, 1000 * lat, replicas * b / lat)
    return best
