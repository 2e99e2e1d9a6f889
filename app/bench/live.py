"""Plumbing of the live benchmark (scripts/bench_live.py): a private local Ray + Serve on its
own HTTP port, (re)deploying the app with overrides, the bare graph, replica memory, and the
profile's capacity estimate. Nothing here decides what is measured."""

from __future__ import annotations

import copy
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from policies.profile import LatencyModel, Profile

log = logging.getLogger(__name__)
APP_NAME = "adaptserve"
BARE_NAME = "bare"


def serve_args(config_path: Path, app_name: str | None = None) -> dict[str, Any]:
    """The `args` of the application in a Serve config file (first one unless named)."""
    data = yaml.safe_load(Path(config_path).read_text())
    apps = data.get("applications") or [data]
    for a in apps:
        if app_name is None or a.get("name") == app_name:
            return copy.deepcopy(a.get("args") or {})
    raise ValueError(f"application {app_name!r} not in {config_path}")


def with_classifier(args: dict[str, Any], family: str, **changes: Any) -> dict[str, Any]:
    """A copy of the app args with one classifier's settings changed."""
    out = copy.deepcopy(args)
    for c in out["classifiers"]:
        if c["name"] == family:
            c.update(changes)
            return out
    raise ValueError(f"classifier {family!r} not in the config")


def classifier_args(args: dict[str, Any], family: str) -> dict[str, Any]:
    for c in args["classifiers"]:
        if c["name"] == family:
            return dict(c)
    raise ValueError(f"classifier {family!r} not in the config")


def start_ray(port: int, num_cpus: int) -> None:
    """A fresh local Ray instance (never someone else's cluster) and Serve on `port`."""
    import ray
    from ray import serve

    os.environ.pop("RAY_ADDRESS", None)
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
             log_to_driver=False, logging_level=logging.WARNING)
    serve.start(http_options={"host": "127.0.0.1", "port": port})


def stop_ray() -> None:
    import ray
    from ray import serve

    try:
        serve.shutdown()
    finally:
        ray.shutdown()


def wait_healthy(url: str, timeout_s: float = 300.0) -> None:
    deadline = time.time() + timeout_s
    last = ""
    while time.time() < deadline:
        try:
            r = httpx.get(url, timeout=5.0)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}: {r.text[:200]}"
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}"
        time.sleep(1.0)
    raise TimeoutError(f"{url} not healthy after {timeout_s:g} s ({last})")


def deploy_app(args: dict[str, Any], base_url: str) -> float:
    """(Re)deploy the app under "/" and wait for /healthz; returns seconds taken."""
    from ray import serve

    from app.builder import build_app

    t = time.perf_counter()
    serve.run(build_app(args), name=APP_NAME, route_prefix="/", blocking=False)
    wait_healthy(base_url + "/healthz")
    return time.perf_counter() - t


def deploy_bare(base_url: str, family: str, models_dir: str, variant: str, task: str | None,
                max_batch_size: int, actor_options: dict[str, Any],
                expected_accuracy: float, loader: str | None = None) -> float:
    from ray import serve

    from app.bench.bare import DEFAULT_LOADER, build_bare_app

    t = time.perf_counter()
    app = build_bare_app(family, models_dir, variant, task, max_batch_size, 1, actor_options,
                         expected_accuracy, loader or DEFAULT_LOADER)
    serve.run(app, name=BARE_NAME, route_prefix="/" + BARE_NAME, blocking=False)
    wait_healthy(f"{base_url}/{BARE_NAME}/healthz")
    return time.perf_counter() - t


@dataclass(frozen=True)
class ProcessMemory:
    actor: str  # Ray actor class name, e.g. ServeReplica:adaptserve:Classifier_family
    pid: int
    rss_mib: float


def serve_memory() -> list[ProcessMemory]:
    """RSS of every live actor process of the Ray instance this driver started (replicas,
    controller, proxy). Reads the GCS actor table through the driver's own connection
    (`ray.util.state.list_actors` needs the dashboard, which the bench does not start, and
    would auto-detect other helpers' clusters)."""
    import psutil
    from ray._private import state

    out = []
    for info in state.actors(actor_state_name="ALIVE").values():
        pid = int(info.get("Pid") or 0)
        try:
            rss = psutil.Process(pid).memory_info().rss / 2**20
        except (psutil.Error, ValueError):
            continue
        out.append(ProcessMemory(str(info.get("ActorClassName")), pid, rss))
    return sorted(out, key=lambda m: m.actor)


def serve_cpu_s() -> dict[str, float]:
    """CPU seconds (user + system) used so far by each live actor process, by actor class
    name (summed over replicas), plus this driver process ("driver": the load generator) and
    the whole machine ("machine")."""
    import psutil
    from ray._private import state

    out: dict[str, float] = {}
    for info in state.actors(actor_state_name="ALIVE").values():
        try:
            t = psutil.Process(int(info.get("Pid") or 0)).cpu_times()
        except (psutil.Error, ValueError):
            continue
        name = str(info.get("ActorClassName"))
        out[name] = out.get(name, 0.0) + t.user + t.system
    me = psutil.Process().cpu_times()
    out["driver"] = me.user + me.system
    t = psutil.cpu_times()  # the whole machine, every process (Ray's own, other jobs') included
    out["machine"] = t.user + t.system + getattr(t, "nice", 0.0) + getattr(t, "irq", 0.0) \
        + getattr(t, "softirq", 0.0)
    return out


def app_replicas(mem: list[ProcessMemory], app: str = APP_NAME) -> list[ProcessMemory]:
    return [m for m in mem if m.actor.startswith(f"ServeReplica:{app}:")]


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
