"""The app on a three-node local Ray cluster, deployed the way a cluster is: a 0-CPU head plus two
worker nodes (each its own `ray start`, temp dir and ports), the code shipped as a
`runtime_env.working_dir` package (a zip served over HTTP), `serve deploy` of a Serve config
generated from serve_config.yaml (app.cli.rayservice.apply_overrides) to the head's dashboard.

Replicas land on the worker nodes only; the builder (on the head) hands them weights, profiles
and plans, so once the app runs, the artifact directory is deleted and a worker node is stopped:
Serve restarts its replicas on the other worker, which find no file and still serve, with their
plans (no fallback). Every process here is started by this test and stopped by pid.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.bench import http
from deployments.config import CLUSTER_ENV
from profiling.paths import REPO_ROOT
from tests.integration.conftest import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

BIN = Path(sys.executable).parent
FAMILY = "vit"
ORDER = ("a", "b")  # worker nodes
REPLICAS = {"Ingress": 2, "Controller": 1, f"Classifier_{FAMILY}": 2}
CLASSIFIER = {"name": FAMILY, "policy": "otas", "max_batch_size": 8, "max_queued_items": 64,
              "num_replicas": REPLICAS[f"Classifier_{FAMILY}"],
              "ray_actor_options": {"num_cpus": 0.3}}
ENV = {**CLUSTER_ENV, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
       # the GCS notices a stopped node within ~3 s
       "RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "3"}


@dataclass
class Node:
    name: str
    proc: subprocess.Popen[bytes]
    temp_dir: Path

    def processes(self) -> list[Any]:
        """This node's `ray start --block` and every process it started."""
        import psutil

        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM (as Kubernetes stops a pod), then SIGKILL whatever it started that is left
        (psutil checks each is still the process it was, so no reused pid is hit)."""
        import psutil

        started = self.processes()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace_s)
        for p in started:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        self.proc.wait(5)


def _ports(*flags: str) -> list[str]:
    return [arg for flag in flags for arg in (flag, str(free_port()))]


def start_node(name: str, root: Path, head_address: str | None, num_cpus: float) -> Node:
    temp_dir = root / name
    args = [str(BIN / "ray"), "start", "--block", "--num-cpus", str(num_cpus), "--num-gpus", "0",
            "--node-ip-address", "127.0.0.1", "--temp-dir", str(temp_dir),
            "--node-name", name, "--object-store-memory", str(128 * 1024 * 1024),
            "--min-worker-port", "0", "--max-worker-port", "0",
            *_ports("--node-manager-port", "--object-manager-port", "--metrics-export-port",
                    "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                    "--runtime-env-agent-port")]
    if head_address is None:
        args += ["--head", "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
                 *_ports("--port", "--dashboard-port", "--ray-client-server-port")]
    else:
        args += ["--address", head_address]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | ENV
    log = (root / f"{name}.log").open("wb")
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=root)
    return Node(name, proc, temp_dir)


def flag(node: Node, name: str) -> str:
    args = node.proc.args
    assert isinstance(args, list)
    return str(args[args.index(name) + 1])


def wait_for(what: str, check: Callable[[], Any], timeout_s: float, every_s: float = 1.0) -> Any:
    end, last = time.time() + timeout_s, None
    while time.time() < end:
        try:
            out = check()
            if out:
                return out
            last = out
        except Exception as exc:  # a cluster still starting answers with errors
            last = exc
        time.sleep(every_s)
    raise AssertionError(f"{what}: not after {timeout_s:g} s (last: {last!r})")


def working_dir_zip(dest: Path) -> Path:
    """The working tree as `git` sees it (tracked and new files, nothing ignored: no .venv,
    .cache, results), in one top-level folder, as a CI job would upload it."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    path = dest / "adaptserve.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in filter(None, files):
            if (REPO_ROOT / rel).is_file():
                z.write(REPO_ROOT / rel, f"adaptserve/{rel}")
    return path


@pytest.fixture
def package_url(tmp_path: Path) -> Iterator[str]:
    """An HTTP artifact store holding the code package (the nodes download it)."""
    working_dir_zip(tmp_path)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(tmp_path))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/adaptserve.zip"
    server.shutdown()


def artifacts(dest: Path) -> dict[str, str]:
    """What the head's builder reads, in `dest` (deleted once the app runs): the family's
    weights and profiles (made in the repo's cache, which later tests share) and its plans
    for this app's settings (made in `dest`)."""
    from app.builder import ensure_artifacts, load_config

    cfg = load_config({"classifiers": [CLASSIFIER],
                       "paths": {"plans_dir": str(dest / "plans_dir")}})
    ensure_artifacts(cfg)
    for key in ("models_dir", "profiles_dir"):
        shutil.copytree(getattr(cfg.paths, key), dest / key,
                        ignore=lambda _, names: [n for n in names if not n.startswith(FAMILY)])
    return {key: str(dest / key) for key in ("models_dir", "profiles_dir", "plans_dir")}


def serve_config(url: str, port: int, paths: dict[str, str]) -> dict[str, Any]:
    from app.cli.rayservice import apply_overrides

    base = yaml.safe_load((REPO_ROOT / "serve_config.yaml").read_text())
    app = "applications.adaptserve"
    return apply_overrides(base, {
        "proxy_location": "HeadOnly",  # one proxy, on the head: worker nodes share this host
        "http_options.host": "127.0.0.1", "http_options.port": port,
        f"{app}.runtime_env": {"working_dir": url},
        f"{app}.args.paths": paths,
        f"{app}.args.http.num_replicas": REPLICAS["Ingress"],
        f"{app}.args.http.ray_actor_options": {"num_cpus": 0.1},
        f"{app}.args.controller": {"interval_s": 0.5, "window_s": 3.0, "stale_after_s": 3.0},
        f"{app}.args.classifiers": [CLASSIFIER]})


def serve_api(dashboard: str) -> dict[str, Any]:
    r = http.get(f"{dashboard}/api/serve/applications/", timeout_s=10.0)
    assert r.status_code == 200, r.text
    return dict(r.json()["applications"]["adaptserve"])


def placement(dashboard: str) -> dict[str, list[str]]:
    """Deployment -> node ids of its RUNNING replicas."""
    app = serve_api(dashboard)
    return {name: sorted(r["node_id"] for r in d.get("replicas", []) if r["state"] == "RUNNING")
            for name, d in app.get("deployments", {}).items()}


def node_ids(dashboard: str) -> dict[str, str]:
    """Live node name -> node id (Ray's state API)."""
    r = http.get(f"{dashboard}/api/v0/nodes", timeout_s=10.0)
    assert r.status_code == 200, r.text
    return {n["node_name"]: n["node_id"] for n in r.json()["data"]["result"]["result"]
            if n["state"] == "ALIVE"}


def placed(dashboard: str, where: set[str]) -> dict[str, list[str]] | None:
    """The placement once every deployment has all its replicas RUNNING, on nodes in `where`."""
    now = placement(dashboard)
    done = all(len(now.get(d, [])) == n for d, n in REPLICAS.items())
    return now if done and {i for ids in now.values() for i in ids} <= where else None


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
    root = Path(tempfile.mkdtemp(prefix="as-nodes-"))  # short: Ray's socket paths must fit
    nodes: dict[str, Node] = {}
    try:
        nodes["head"] = start_node("head", root, None, num_cpus=0)
        head = f"127.0.0.1:{flag(nodes['head'], '--port')}"
        dashboard = f"http://127.0.0.1:{flag(nodes['head'], '--dashboard-port')}"
        wait_for("head dashboard", lambda: node_ids(dashboard).get("head"), 90)
        for w in ORDER:
            nodes[w] = start_node(w, root, head, num_cpus=1)
        ids = wait_for("worker nodes", lambda: (n := node_ids(dashboard)).keys() >= set(ORDER)
                       and n, 90)
        _deploy_and_stop_a_worker(root, dashboard, ids, nodes, package_url, inputs, task)
    finally:
        for node in reversed(list(nodes.values())):
            node.stop()
        shutil.rmtree(root, ignore_errors=True)


def _deploy_and_stop_a_worker(root: Path, dashboard: str, ids: dict[str, str],
                              nodes: dict[str, Node], package_url: str,
                              inputs: dict[str, Any], task: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    paths = artifacts(root / "artifacts")
    config = root / "serve_config.cluster.yaml"
    config.write_text(yaml.safe_dump(serve_config(package_url, port, paths), sort_keys=False))
    subprocess.run([str(BIN / "serve"), "deploy", str(config), "--address", dashboard],
                   check=True, env={**os.environ, **ENV}, timeout=60)
    workers = {ids[w] for w in ORDER}
    before = wait_for("replicas running on worker nodes", lambda: placed(dashboard, workers), 300)
    assert wait_for("app answers", lambda: serving(url, inputs, task), 60)
    shutil.rmtree(root / "artifacts")  # from here on, no replica can read a file of them

    counts = {w: sum(ids[w] in v for v in before.values()) for w in ORDER}
    gone = max(ORDER, key=lambda w: counts[w])  # the worker holding the most replicas
    [kept] = [w for w in ORDER if w != gone]
    t0 = time.time()
    with Client(url, inputs, task) as during:  # one request after another through the stop
        nodes[gone].stop()
        after = wait_for(f"replicas of node {gone} restarted on node {kept}",
                         lambda: placed(dashboard, {ids[kept]}), 180)
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
