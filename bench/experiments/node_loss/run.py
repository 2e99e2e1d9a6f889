"""The node-loss figure (python -m bench node-loss parses the options; the clients are
bench/experiments/node_loss/load.py, the figures bench/experiments/node_loss/report.py, the cluster
bench/core/cluster.py).

A three-node local Ray cluster (a 0-CPU head, two worker nodes with `worker_cpus` each), the
app deployed the way a cluster is (`serve deploy` of a config generated from
serve_config.yaml, the code as a working_dir zip over HTTP) with one family, its classifier
as configured there but with `classifier_replicas` replicas of 0.3 CPU, and `ingress_replicas`
ingress replicas; the one Serve proxy runs on the head. Then:

1. single `/v1/classify` requests to the family, Poisson at `qps` (each with its request id),
   while `/healthz` and `/v1/status` are read every `watch_period_s`;
2. after `warmup_s + steady_s`, the worker node holding the most classifier replicas of the
   family (then the most replicas of any deployment) is stopped (SIGTERM to its `ray start`,
   then SIGKILL to what is left, as Kubernetes stops a pod);
3. the load goes on until Serve shows every replica running on the other worker, the last
   answers are 200s and /healthz answers 200, then `after_s` more; every request sent gets
   its answer (or its client timeout) before the run ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.core import http
from bench.core.cluster import (
    FAST_NODE_HEALTH,
    NODE_ENV,
    Cluster,
    artifacts,
    cluster_config,
    free_port,
    local_cluster,
    package_server,
    placed,
    serve_deploy,
    wait_for,
)
from bench.experiments.node_loss.load import Answer, Probe, loop_lag, send_load, watch
from bench.experiments.single_request.run import code_version
from profiling.paths import REPO_ROOT

log = logging.getLogger(__name__)
WORKERS = ("a", "b")
CONTROLLER = {"interval_s": 0.5, "window_s": 3.0, "stale_after_s": 3.0}
STOPS = ("term", "kill")


@dataclass(frozen=True)
class NodeLossSettings:
    family: str = "vit"
    classifier_replicas: int = 1
    ingress_replicas: int = 2
    worker_cpus: int = 1  # Ray logical CPUs per worker node
    qps: float = 10.0  # single requests per second (Poisson)
    slo_ms: float | None = None  # None: the family's default SLO in serve_config.yaml
    warmup_s: float = 5.0  # load before the steady period (not counted)
    steady_s: float = 20.0  # the "before" period
    after_s: float = 10.0  # load after the app is served again
    recover_timeout_s: float = 180.0
    request_timeout_s: float = 30.0  # the client's; an answer later than this is a timeout
    watch_period_s: float = 0.25
    stop: str = "term"  # term: SIGTERM (Ray drains the node) | kill: SIGKILL all at once
    stop_grace_s: float = 40.0  # term: SIGKILL what is left after this (Ray drains <= 30 s)
    graceful_shutdown_s: float | None = None  # Serve's graceful_shutdown_timeout_s; None: 20
    fast_node_health: bool = True  # the GCS checks nodes every 1 s (3 misses: dead), not Ray's
    seed: int = 0
    logs_dir: str | None = "results/node_loss/logs"  # the nodes' Serve logs are copied here
    command: str = ""

    def __post_init__(self) -> None:
        if self.stop not in STOPS:
            raise ValueError(f"stop {self.stop!r}: valid are {list(STOPS)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def classifier(family: str, replicas: int) -> dict[str, Any]:
    """The family's classifier as serve_config.yaml configures it, with `replicas` replicas of
    0.3 CPU (two workers of 1 CPU hold the app twice over)."""
    doc = yaml.safe_load((REPO_ROOT / "serve_config.yaml").read_text())
    [app] = [a for a in doc["applications"] if a["name"] == "adaptserve"]
    found = {c["name"]: c for c in app["args"]["classifiers"]}
    if family not in found:
        raise ValueError(f"family {family!r} not in serve_config.yaml; valid: {sorted(found)}")
    return {**found[family], "num_replicas": replicas, "ray_actor_options": {"num_cpus": 0.3}}


def bodies(family: str, slo_ms: float, models_dir: Path, limit: int = 64) -> list[bytes]:
    """Request bodies from the family's held-out test examples (its first task)."""
    from deployments.models.registry import load_model

    model = load_model(family, cache_dir=models_dir)
    task = model.tasks()[0]
    return [json.dumps({"model": family, "task": task, "inputs": e.inputs,
                        "slo": {"latency_ms": slo_ms}}).encode()
            for e in model.examples("test", task, limit=limit)]


ACCESS_LINE = re.compile(r" (nodeloss-\d+) -- POST /v1/classify (\d+) ([0-9.]+)ms")


def proxy_latencies(serve_logs: Path) -> dict[str, float]:
    """Request id -> latency the Serve proxy logged for it (its access log: from the request
    reaching the proxy's handler to the answer), for the benchmark's requests."""
    out: dict[str, float] = {}
    for path in serve_logs.glob("proxy_*.log"):
        for line in path.read_text(errors="replace").splitlines():
            m = ACCESS_LINE.search(line)
            if m:
                out[m.group(1)] = float(m.group(3))
    return out


def serving(url: str, body: bytes, n: int = 5) -> bool:
    return all(http.post_bytes(f"{url}/v1/classify", body, timeout_s=30.0).status_code == 200
               for _ in range(n))


def victim(cluster: Cluster, before: dict[str, list[str]], family: str) -> tuple[str, str]:
    """(stopped, kept): the worker with the most classifier replicas of the family, then the
    most replicas of any deployment."""
    ids = cluster.ids
    mine = before.get(f"Classifier_{family}", [])

    def weight(w: str) -> tuple[int, int]:
        return mine.count(ids[w]), sum(v.count(ids[w]) for v in before.values())
    gone = max(WORKERS, key=weight)
    [kept] = [w for w in WORKERS if w != gone]
    return gone, kept


def _recovered(answers: list[Answer], probes: list[Probe], since_s: float, n: int = 5) -> bool:
    """The last `n` answers to requests sent since `since_s` are 200s and so is the last
    /healthz read since then."""
    recent = sorted((a for a in answers if a.sent_s >= since_s), key=lambda a: a.sent_s)[-n:]
    health = [p for p in probes if p.route == "/healthz" and p.sent_s >= since_s]
    return (len(recent) == n and all(a.status == 200 for a in recent)
            and bool(health) and health[-1].status == 200)


async def _stop_and_recover(s: NodeLossSettings, cluster: Cluster, stopped: str, kept: str,
                            replicas: dict[str, int], answers: list[Answer],
                            probes: list[Probe]) -> dict[str, Any]:
    """Stop the node, wait for Serve's placement and the clients to say it is back."""
    t: dict[str, Any] = {"stop_s": time.time()}
    node = cluster.nodes[stopped]
    if s.stop == "term":
        await asyncio.to_thread(node.stop, s.stop_grace_s)
    else:
        await asyncio.to_thread(node.kill)
    t["node_gone_s"] = time.time()
    try:
        t["placement_after"] = await asyncio.to_thread(
            wait_for, f"replicas restarted on node {kept}",
            lambda: placed(cluster.dashboard, replicas, {cluster.ids[kept]}),
            s.recover_timeout_s, 0.5)
        t["placed_s"] = time.time()
    except TimeoutError as exc:
        t["placed_s"], t["timeout"] = None, str(exc)
        return t
    end = t["stop_s"] + s.recover_timeout_s
    while time.time() < end and not _recovered(answers, probes, t["placed_s"]):
        await asyncio.sleep(0.25)
    t["recovered_s"] = time.time() if time.time() < end else None
    return t


async def drive(s: NodeLossSettings, url: str, cluster: Cluster, stopped: str, kept: str,
                replicas: dict[str, int], payloads: list[bytes]) -> dict[str, Any]:
    """Load and health reads through the node stop; every answer and read, and when what
    happened."""
    answers: list[Answer] = []
    probes: list[Probe] = []
    lags: list[tuple[float, float]] = []
    done = asyncio.Event()
    clients = [send_load(f"{url}/v1/classify", payloads, s.qps, s.seed, done,
                         s.request_timeout_s, answers),
               *(watch(url, route, s.family, s.watch_period_s, done, 5.0, probes)
                 for route in ("/healthz", "/v1/status")), loop_lag(done, lags)]
    tasks = [asyncio.create_task(c) for c in clients]
    start_s = time.time()
    await asyncio.sleep(s.warmup_s + s.steady_s)
    log.info("stopping node %s", stopped)
    loadavg = os.getloadavg()[0]
    times = await _stop_and_recover(s, cluster, stopped, kept, replicas, answers, probes)
    log.info("placed again %s, served again %s", times.get("placed_s"), times.get("recovered_s"))
    if times.get("recovered_s") is not None:
        await asyncio.sleep(s.after_s)
    done.set()
    load_end_s = time.time()
    await asyncio.gather(*tasks)
    return {**times, "load_start_s": start_s, "steady_start_s": start_s + s.warmup_s,
            "load_end_s": load_end_s, "answers": [a.to_dict() for a in answers],
            "probes": [p.to_dict() for p in probes], "client_loop_lags": lags,
            "loadavg_1min": {"at_stop": loadavg, "at_end": os.getloadavg()[0]}}


def _deploy(s: NodeLossSettings, cluster: Cluster, package_url: str,
            cls: dict[str, Any]) -> tuple[str, dict[str, int], dict[str, list[str]]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    replicas = {"Ingress": s.ingress_replicas, "Controller": 1,
                f"Classifier_{s.family}": s.classifier_replicas}
    paths = artifacts(cluster.root / "artifacts", [cls])
    options = ({} if s.graceful_shutdown_s is None else
               {d: {"graceful_shutdown_timeout_s": s.graceful_shutdown_s} for d in replicas})
    config = cluster_config(package_url, port, paths, [cls], s.ingress_replicas, CONTROLLER,
                            options)
    t0 = time.time()
    serve_deploy(config, cluster.root / "serve_config.cluster.yaml", cluster.dashboard)
    workers = {cluster.ids[w] for w in WORKERS}
    before = wait_for("replicas running on worker nodes",
                      lambda: placed(cluster.dashboard, replicas, workers), 300)
    log.info("deployed in %.0f s: %s", time.time() - t0, before)
    return url, replicas, before


def run_node_loss(s: NodeLossSettings) -> dict[str, Any]:
    """The whole benchmark: the JSON the report reads."""
    cls = classifier(s.family, s.classifier_replicas)
    slo_ms = float(s.slo_ms if s.slo_ms is not None else cls.get("default_slo_ms", 200.0))
    version = code_version()
    out: dict[str, Any] = {"command": s.command, "commit": version["commit"],
                           "modified": version["modified"], "settings": s.to_dict(),
                           "slo_ms": slo_ms, "classifier": cls}
    node_env = {k: v for k, v in NODE_ENV.items()
                if s.fast_node_health or k not in FAST_NODE_HEALTH}
    t0 = time.time()
    with (tempfile.TemporaryDirectory(prefix="as-package-") as package_dir,
          package_server(Path(package_dir)) as package_url,
          local_cluster(WORKERS, s.worker_cpus, node_env=node_env) as cluster):
        url, replicas, before = _deploy(s, cluster, package_url, cls)
        payloads = bodies(s.family, slo_ms, Path(cluster.root / "artifacts" / "models_dir"))
        wait_for("app answers", lambda: serving(url, payloads[0]), 120)
        stopped, kept = victim(cluster, before, s.family)
        names = {v: k for k, v in cluster.ids.items()}
        out.update(replicas=replicas, node_ids=cluster.ids, stopped=stopped, kept=kept,
                   placement_before={d: [names.get(i, i) for i in v] for d, v in before.items()})
        out.update(asyncio.run(drive(s, url, cluster, stopped, kept, replicas, payloads)))
        if s.logs_dir:
            out["logs"] = str(Path(s.logs_dir) / time.strftime("%Y%m%d-%H%M%S"))
            cluster.save_logs(Path(out["logs"]))
            out["proxy_ms"] = proxy_latencies(Path(out["logs"]) / "head" / "serve")
        after = out.get("placement_after") or {}
        out["placement_after"] = {d: [names.get(i, i) for i in v] for d, v in after.items()}
    out["wall_s"] = time.time() - t0
    return out
