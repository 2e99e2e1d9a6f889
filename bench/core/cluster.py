"""A local multi-node Ray cluster on one machine, deployed to the way a cluster is (used by
tests/integration/test_cluster_nodes.py and the node-loss benchmark, bench/experiments/node_loss/run.py).

- `local_cluster`: a 0-CPU head plus worker nodes, each its own `ray start --block` with its
  own temp dir and ports (a node can be stopped alone, by pid: `Node.stop`, `Node.kill`);
- `package_server`: the code as a `runtime_env.working_dir` zip served over HTTP;
- `artifacts`, `cluster_config`, `serve_deploy`: the builder's inputs in a directory of their
  own, a Serve config generated from serve_config.yaml (app.cli.rayservice.apply_overrides),
  `serve deploy` of it to the head's dashboard;
- `node_ids`, `placement`, `placed`: where Serve's replicas run (the dashboard's APIs).
Every process here is started by the caller's process and stopped by pid.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from bench.core import http
from bench.core.http import free_port
from bench.core.wait import wait_for
from deployments.config import CLUSTER_ENV
from profiling.paths import REPO_ROOT

log = logging.getLogger(__name__)
BIN = Path(sys.executable).parent
APP_NAME = "adaptserve"
FAST_NODE_HEALTH = {"RAY_health_check_period_ms": "1000",  # the GCS sees a dead node in ~3 s
                    "RAY_health_check_failure_threshold": "3"}  # (Ray's default: ~15 s)
NODE_ENV = {**CLUSTER_ENV, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0",
            **FAST_NODE_HEALTH}


@dataclass(frozen=True)
class Node:
    name: str
    proc: subprocess.Popen[bytes]
    temp_dir: Path

    def flag(self, name: str) -> str:
        """The value of one of this node's `ray start` flags (its ports)."""
        args = self.proc.args
        assert isinstance(args, list)
        return str(args[args.index(name) + 1])

    def processes(self) -> list[Any]:
        """This node's `ray start --block` and every process it started."""
        import psutil

        try:
            root = psutil.Process(self.proc.pid)
            return [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM (as Kubernetes stops a pod; Ray drains the node), then SIGKILL whatever it
        started that is left (psutil checks each is still the process it was, so no reused pid
        is hit)."""
        started = self.processes()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(grace_s)
        self._kill(started)

    def kill(self) -> None:
        """SIGKILL every process of the node at once (a crash: no drain, nothing told)."""
        self._kill(self.processes())

    def _kill(self, processes: list[Any]) -> None:
        import psutil

        for p in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        self.proc.wait(5)


def _ports(*flags: str) -> list[str]:
    return [arg for flag in flags for arg in (flag, str(free_port()))]


def start_node(name: str, root: Path, head_address: str | None, num_cpus: int,
               node_env: Mapping[str, str] = NODE_ENV) -> Node:
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
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | dict(node_env)
    log = (root / f"{name}.log").open("wb")
    proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True, cwd=root)
    return Node(name, proc, temp_dir)


@dataclass(frozen=True)
class Cluster:
    root: Path  # the nodes' temp dirs and logs
    nodes: dict[str, Node]  # "head" and the workers, by name
    ids: dict[str, str]  # node name -> Ray node id

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.nodes['head'].flag('--dashboard-port')}"

    def save_logs(self, dest: Path) -> None:
        """Copy each node's `ray start` output and Serve logs to `dest/<node>/`."""
        for name, node in self.nodes.items():
            (dest / name).mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.copy(self.root / f"{name}.log", dest / name / "ray_start.log")
            serve_logs = node.temp_dir / "session_latest" / "logs" / "serve"
            if serve_logs.is_dir():
                shutil.copytree(serve_logs, dest / name / "serve", dirs_exist_ok=True)


@contextlib.contextmanager
def local_cluster(workers: Sequence[str], worker_cpus: int, start_timeout_s: float = 180.0,
                  node_env: Mapping[str, str] = NODE_ENV) -> Iterator[Cluster]:
    """A 0-CPU head and one node per name in `workers` with `worker_cpus` each; every node is
    stopped (workers first) and its temp dir removed on the way out."""
    root = Path(tempfile.mkdtemp(prefix="as-nodes-"))  # short: Ray's socket paths must fit
    nodes: dict[str, Node] = {}
    try:
        nodes["head"] = start_node("head", root, None, 0, node_env)
        head = f"127.0.0.1:{nodes['head'].flag('--port')}"
        dashboard = f"http://127.0.0.1:{nodes['head'].flag('--dashboard-port')}"
        wait_for("head dashboard", lambda: node_ids(dashboard).get("head"), start_timeout_s)
        for w in workers:
            nodes[w] = start_node(w, root, head, worker_cpus, node_env)
        ids = wait_for("worker nodes", lambda: (n := node_ids(dashboard)).keys() >= set(workers)
                       and n, start_timeout_s)
        yield Cluster(root, nodes, dict(ids))
    except BaseException:
        for name, node in nodes.items():
            log_tail(root / f"{name}.log")
            log_tail(node.temp_dir / "session_latest" / "logs" / "raylet.out", 15)
        raise
    finally:
        for node in reversed(list(nodes.values())):
            node.stop()
        shutil.rmtree(root, ignore_errors=True)


def log_tail(path: Path, lines: int = 30) -> None:  # the cluster's temp dir goes with it
    with contextlib.suppress(OSError):
        tail = path.read_text(errors="replace").splitlines()[-lines:]
        log.warning("%s:\n%s", path, "\n".join(tail))


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


@contextlib.contextmanager
def package_server(dest: Path) -> Iterator[str]:
    """An HTTP artifact store holding the code package (the nodes download it): its URL."""
    working_dir_zip(dest)
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(dest))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/adaptserve.zip"
    finally:
        server.shutdown()


def artifacts(dest: Path, classifiers: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """What the head's builder reads, in `dest` (deletable once the app runs): the families'
    weights and profiles (from the repo's cache) and their plans for these settings."""
    from app.builder import ensure_artifacts, load_config

    cfg = load_config({"classifiers": [dict(c) for c in classifiers],
                       "paths": {"plans_dir": str(dest / "plans_dir")}})
    ensure_artifacts(cfg)
    names = tuple(str(c["name"]) for c in classifiers)
    for key in ("models_dir", "profiles_dir"):
        shutil.copytree(getattr(cfg.paths, key), dest / key,
                        ignore=lambda _, found: [n for n in found if not n.startswith(names)])
    return {key: str(dest / key) for key in ("models_dir", "profiles_dir", "plans_dir")}


def cluster_config(package_url: str, port: int, paths: Mapping[str, str],
                   classifiers: Sequence[Mapping[str, Any]], ingress_replicas: int,
                   controller: Mapping[str, float],
                   deployments: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """serve_config.yaml with this cluster's overrides: one proxy, on the head (worker nodes
    share this host), the code from `package_url`, the artifacts from `paths`; `deployments`:
    Serve's per-deployment options by deployment name (e.g. graceful_shutdown_timeout_s)."""
    from app.cli.rayservice import apply_overrides

    base = yaml.safe_load((REPO_ROOT / "serve_config.yaml").read_text())
    app = f"applications.{APP_NAME}"
    extra = ({f"{app}.deployments": [{"name": n, **opts} for n, opts in deployments.items()]}
             if deployments else {})
    return apply_overrides(base, {**extra,
        "proxy_location": "HeadOnly",
        "http_options.host": "127.0.0.1", "http_options.port": port,
        f"{app}.runtime_env": {"working_dir": package_url},
        f"{app}.args.paths": dict(paths),
        f"{app}.args.http.num_replicas": ingress_replicas,
        f"{app}.args.http.ray_actor_options": {"num_cpus": 0.1},
        f"{app}.args.controller": dict(controller),
        f"{app}.args.classifiers": [dict(c) for c in classifiers]})


def serve_deploy(config: Mapping[str, Any], path: Path, dashboard: str) -> None:
    """Write `config` to `path` and `serve deploy` it to the cluster behind `dashboard`."""
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False))
    subprocess.run([str(BIN / "serve"), "deploy", str(path), "--address", dashboard],
                   check=True, env={**os.environ, **NODE_ENV}, timeout=60)


def _get_json(url: str) -> Any:
    r = http.get(url, timeout_s=10.0)
    if r.status_code != 200:
        raise RuntimeError(f"{url} answered {r.status_code}: {r.text[:300]}")
    return r.json()


def serve_api(dashboard: str) -> dict[str, Any]:
    return dict(_get_json(f"{dashboard}/api/serve/applications/")["applications"][APP_NAME])


def placement(dashboard: str) -> dict[str, list[str]]:
    """Deployment -> node ids of its RUNNING replicas."""
    app = serve_api(dashboard)
    return {name: sorted(r["node_id"] for r in d.get("replicas", []) if r["state"] == "RUNNING")
            for name, d in app.get("deployments", {}).items()}


def node_ids(dashboard: str) -> dict[str, str]:
    """Live node name -> node id (Ray's state API)."""
    nodes = _get_json(f"{dashboard}/api/v0/nodes")["data"]["result"]["result"]
    return {n["node_name"]: n["node_id"] for n in nodes if n["state"] == "ALIVE"}


def placed(dashboard: str, replicas: Mapping[str, int],
           where: set[str]) -> dict[str, list[str]] | None:
    """The placement once every deployment has all its `replicas` RUNNING, on nodes in `where`."""
    now = placement(dashboard)
    done = all(len(now.get(d, [])) == n for d, n in replicas.items())
    return now if done and {i for ids in now.values() for i in ids} <= where else None
