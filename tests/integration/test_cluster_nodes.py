"""The app on a three-node local Ray cluster, deployed the way a cluster is: a 0-CPU head plus two
worker nodes (each its own `ray start`, temp dir and ports), the code shipped as a
`runtime_env.working_dir` package (a zip served over HTTP), `serve deploy` of a Serve config
generated from serve_config.yaml (app.cli.rayservice.apply_overrides) to the head's dashboard.
The cluster machinery is bench/core/cluster.py (the node-loss benchmark shares it).

Replicas land on the worker nodes only; the builder (on the head) hands them profiles and plans
as arguments and the weights as a path every node sees (here: the same host), so once the app
runs, the profile and plan directories are deleted and a worker node is stopped: Serve restarts
its replicas on the other worker, which load the weights from their path and serve with their
plans (no fallback). Every process here is started by this test and stopped by pid.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.core import http
from bench.core.cluster import (
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

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FAMILY = "vit"
ORDER = ("a", "b")  # worker nodes
REPLICAS = {"Ingress": 2, "Controller": 1, f"Classifier_{FAMILY}": 2}
CLASSIFIER = {"name": FAMILY, "policy": "otas", "max_batch_size": 8, "max_queued_items": 64,
              "num_replicas": REPLICAS[f"Classifier_{FAMILY}"],
              "ray_actor_options": {"num_cpus": 0.3}}
CONTROLLER = {"interval_s": 0.5, "window_s": 3.0, "stale_after_s": 3.0}


@pytest.fixture
def package_url(tmp_path: Path) -> Iterator[str]:
    """An HTTP artifact store holding the code package (the nodes download it)."""
    with package_server(tmp_path) as url:
        yield url


def classify(url: str, inputs: dict[str, Any], task: str) -> http.HttpResponse:
    body = {"model": FAMILY, "task": task, "inputs": inputs, "slo": {"latency_ms": 5000.0}}
    return http.post_json(f"{url}/v1/classify", body, timeout_s=30.0)


def serving(url: str, inputs: dict[str, Any], task: str, n: int = 5) -> bool:
    return all(classify(url, inputs, task).json().get("status") == "ok" for _ in range(n))


class Client:
    """Sends one request after another while the block runs; records each answer's HTTP status,
    and any request that got none (transport error or timeout)."""

    def __init__(self, url: str, inputs: dict[str, Any], task: str) -> None:
        self.args = (url, inputs, task)
        self.statuses: list[int] = []
        self.failures: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.statuses.append(classify(*self.args).status_code)
            except http.HttpTransportError as exc:
                self.failures.append(str(exc))
            time.sleep(0.05)

    def __enter__(self) -> Client:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(60)


def test_replicas_on_worker_nodes_survive_a_stopped_node(
        package_url: str, trained_models_dir: Path) -> None:
    from deployments.models.registry import load_model

    model = load_model(FAMILY, cache_dir=trained_models_dir)
    task = model.tasks()[0]
    inputs = model.examples("test", task, limit=1)[0].inputs
    with local_cluster(ORDER, worker_cpus=1) as cluster:
        _deploy_and_stop_a_worker(cluster, package_url, inputs, task)


def _deploy_and_stop_a_worker(cluster: Cluster, package_url: str,
                              inputs: dict[str, Any], task: str) -> None:
    root, dashboard, ids = cluster.root, cluster.dashboard, cluster.ids
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    paths = artifacts(root / "artifacts", [CLASSIFIER])
    config = cluster_config(package_url, port, paths, [CLASSIFIER], REPLICAS["Ingress"],
                            CONTROLLER)
    serve_deploy(config, root / "serve_config.cluster.yaml", dashboard)
    workers = {ids[w] for w in ORDER}
    before = wait_for("replicas running on worker nodes",
                      lambda: placed(dashboard, REPLICAS, workers), 300)
    assert wait_for("app answers", lambda: serving(url, inputs, task), 60)
    # the weights stay (a volume every node sees: replicas load them from their path); the
    # profiles and plans go: they came with the app, and a restarted replica needs no file of them
    shutil.rmtree(paths["profiles_dir"])
    shutil.rmtree(paths["plans_dir"])

    counts = {w: sum(ids[w] in v for v in before.values()) for w in ORDER}
    gone = max(ORDER, key=lambda w: counts[w])  # the worker holding the most replicas
    [kept] = [w for w in ORDER if w != gone]
    t0 = time.time()
    with Client(url, inputs, task) as during:  # one request after another through the stop
        cluster.nodes[gone].stop()
        after = wait_for(f"replicas of node {gone} restarted on node {kept}",
                         lambda: placed(dashboard, REPLICAS, {ids[kept]}), 180)
        assert wait_for("app answers again", lambda: serving(url, inputs, task, n=10), 60)
        recovered_s = time.time() - t0
    # every request got an answer (the proxy on the head never went away), none hung
    assert during.statuses and not during.failures, during.failures
    status = http.get(f"{url}/v1/status", timeout_s=10.0).json()["deployments"][FAMILY]
    assert status["fallback"] == {}, status  # the plans came with the app, not from files
    assert all(v != "fallback" for r in status["replicas"] for v in r["plan_versions"].values())
    print(json.dumps({"placement_before": before, "placement_after": after, "stopped": gone,
                      "recovered_s": round(recovered_s, 1),
                      "answers_during": dict(sorted(Counter(during.statuses).items()))}))
