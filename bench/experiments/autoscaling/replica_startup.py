"""How long a scale-up of one stage takes on this machine, from "Serve decided to add a replica"
to "the replica serves" (docs/autoscaling.md, "On a cluster: nodes for replicas").

    RAY_AUTH_MODE=disabled flock /tmp/live.lock .venv/bin/python -m bench replica-startup
    ... --stages ImageEncoder --repeats 2          (one stage)

A private local Ray (its own temp dir and HTTP port) serves the app of `--config` (default
serve_config.vlm.yaml, the cached VLM; this never trains it), deployed as `serve run`/`serve
deploy` do (`deploy_apps` of the config), with the stages' `autoscaling:` and the app's
`autoscaling_policy` taken out: here the script, not the policy, decides when a replica is
added (what is timed is the replica's start, the same whoever decides it). Then, per stage and
repeat: the same config with that deployment's `num_replicas` one higher (a lightweight update:
no other replica restarts, checked), timed until `serve status` shows the new replica RUNNING
and a chat request through the app answers; then back down. The phases come from Serve's own
logs (controller: "Adding 1 replica", "started successfully ... took X s"; replica: "Started
initializing replica"), all on this clock:

  decide    deploy_apps sent -> controller adds the replica (its 0.1 s control loop)
  process   -> the replica actor runs its init (scheduling, a worker process, Ray/Serve
               imports, the init args: the model's files)
  init      the constructor, reconfigure and first health check, as the controller reports
            them (ImageEncoder: the vision tower; LLMBackend: the vLLM engine on CPU)
  running   total until `serve status` shows it RUNNING (polled every 0.1 s)
  answer    total until a chat request through the app answered (not pinned to the new replica)

Also (`--node-joins`): a Ray worker node's start, `ray start --address` to the node ALIVE, in a
local multi-node cluster (what a new pod does after its image is pulled). Table on stdout, a
Result to --out (the parts this run measured replace those of an existing file's data).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from bench.core import wait as core_wait
from bench.core.cli import experiment_parser, settings_of
from bench.core.paths import REPO
from bench.core.result import Run, read_result

APP = "adaptserve"
TS = re.compile(r"^\w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
PHASES = ("decide", "process", "init", "running", "answer")
TOOK = re.compile(r"initial health check took ([\d.]+)s")


def _ts(line: str) -> float | None:
    m = TS.match(line)
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp() if m else None


def _lines_after(path: Path, t0: float) -> list[tuple[float, str]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        t = _ts(line)
        if t is not None and t >= t0 - 0.01:
            out.append((t, line))
    return out


def serve_logs() -> Path:
    import ray

    node = ray._private.worker._global_node
    assert node is not None, "Ray is not started"
    return Path(node.get_logs_dir_path()) / "serve"


def phases_from_logs(logs: Path, stage: str, t0: float) -> dict[str, Any]:
    """The new replica's id and its phase timestamps from the controller's and its own log."""
    dep = f"Deployment(name='{stage}', app='{APP}')"
    out: dict[str, Any] = {}
    for t, line in _lines_after(next(logs.glob("controller_[0-9]*.log")), t0):
        if f"Adding 1 replica to {dep}" in line and "t_decided" not in out:
            out["t_decided"] = t
        m = re.search(rf"Starting Replica\(id='(\w+)', deployment='{stage}'", line)
        if m and "replica_id" not in out:
            out["replica_id"] = m.group(1)
        rid = out.get("replica_id")
        if rid and f"Replica(id='{rid}'" in line and "started successfully" in line:
            out["t_ready"] = t
            took = TOOK.search(line)
            out["init_s"] = float(took.group(1)) if took else None
    rid = out.get("replica_id")
    for path in logs.glob(f"replica_{APP}_{stage}_{rid}.log") if rid else ():
        for t, line in _lines_after(path, t0):
            if "Started initializing replica." in line:
                out.setdefault("t_init_start", t)
    return out


def replica_logs(logs: Path) -> set[str]:
    """One log file per replica ever started (the name holds the replica's id)."""
    return {p.name for p in logs.glob(f"replica_{APP}_*.log")}


def _app_config(config: dict[str, Any]) -> dict[str, Any]:
    [app] = [a for a in config["applications"] if a["name"] == APP]
    return dict(app)


def fixed_stages(config: dict[str, Any]) -> dict[str, Any]:
    """`config` without autoscaling: the stages at their `num_replicas`, no app-level policy."""
    out = copy.deepcopy(config)
    app = _app_config(out)
    app.pop("autoscaling_policy", None)
    generation = (app.get("args") or {}).get("generation") or {}
    for stage in ("encoder", "llm"):
        (generation.get(stage) or {}).pop("autoscaling", None)
    out["applications"] = [app if a["name"] == APP else a for a in out["applications"]]
    return out


def with_replicas(config: dict[str, Any], stage: str, n: int | None) -> dict[str, Any]:
    """`config` with `deployments: [{name: stage, num_replicas: n}]` (None: no override)."""
    out = copy.deepcopy(config)
    app = _app_config(out)
    app.pop("deployments", None)
    if n is not None:
        app["deployments"] = [{"name": stage, "num_replicas": n}]
    out["applications"] = [app if a["name"] == APP else a for a in out["applications"]]
    return out


def deploy(config: dict[str, Any]) -> None:
    from ray.serve.context import _get_global_client
    from ray.serve.schema import ServeDeploySchema

    client = _get_global_client()
    assert client is not None, "Serve is not started"
    client.deploy_apps(ServeDeploySchema.model_validate(config), _blocking=False)


def replica_states(stage: str) -> dict[str, int]:
    from ray import serve

    app = serve.status().applications.get(APP)
    if app is None or stage not in app.deployments:
        return {}
    return {str(k): int(v) for k, v in app.deployments[stage].replica_states.items()}


def wait_for(predicate: Any, timeout_s: float, what: str, poll_s: float = 0.1) -> float:
    """The wall time at which `predicate()` first held (bench.core.wait polls it)."""
    core_wait.wait_for(what, predicate, timeout_s, poll_s)
    return time.time()


def wait_app_running(timeout_s: float) -> None:
    from ray import serve

    def running() -> bool:
        app = serve.status().applications.get(APP)
        if app is not None and str(app.status).endswith("DEPLOY_FAILED"):
            raise RuntimeError(f"deploy failed: {app.message}")
        return app is not None and str(app.status).endswith("RUNNING")

    wait_for(running, timeout_s, "application RUNNING", poll_s=1.0)


def chat_body(stage: str, image_url: str) -> bytes:
    parts: list[dict[str, Any]] = [{"type": "text", "text": "What is three plus four?"}]
    if stage == "ImageEncoder":
        parts.insert(0, {"type": "image_url", "image_url": {"url": image_url}})
    return json.dumps({"model": "vlm", "messages": [{"role": "user", "content": parts}],
                       "max_tokens": 4, "temperature": 0}).encode()


def ask(url: str, body: bytes) -> float:
    from bench.core import http

    r = http.post_bytes(url + "/v1/chat/completions", body, timeout_s=120.0)
    if r.status_code != 200:
        raise RuntimeError(f"chat answered HTTP {r.status_code}: {r.text[:300]}")
    return time.time()


def measure_once(config: dict[str, Any], stage: str, url: str, image_url: str,
                 timeout_s: float) -> dict[str, Any]:
    """One scale-up by one replica of `stage`, timed; then back to where it was."""
    logs = serve_logs()
    base = replica_states(stage).get("RUNNING", 0)
    load1 = os.getloadavg()[0]  # the 2 cores are shared: how busy they were
    before = replica_logs(logs)
    t0 = time.time()
    deploy(with_replicas(config, stage, base + 1))
    t_running = wait_for(lambda: replica_states(stage) == {"RUNNING": base + 1}, timeout_s,
                         f"{stage} at {base + 1} RUNNING")
    t_answer = ask(url, chat_body(stage, image_url))
    time.sleep(1.0)  # the controller's log line may trail its state by a loop
    row: dict[str, Any] = {"stage": stage, "replicas": f"{base}->{base + 1}", "load1": load1,
                           **phases_from_logs(logs, stage, t0)}
    row["restarted_elsewhere"] = sorted(n for n in replica_logs(logs) - before
                                        if f"_{stage}_" not in n)
    row.update(_phases(row, t0, t_running, t_answer))
    deploy(with_replicas(config, stage, base))
    wait_for(lambda: replica_states(stage) == {"RUNNING": base}, timeout_s,
             f"{stage} back to {base}")
    time.sleep(5.0)  # the stopped replica's process exits and frees its memory
    return row


def _phases(row: dict[str, Any], t0: float, t_running: float, t_answer: float) -> dict[str, Any]:
    decided, started = row.get("t_decided"), row.get("t_init_start")
    process = None if decided is None or started is None else round(started - decided, 2)
    return {"decide": None if decided is None else round(decided - t0, 2), "process": process,
            "init": row.get("init_s"), "running": round(t_running - t0, 2),
            "answer": round(t_answer - t0, 2)}


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'stage':<13}{'rep':>4}{'replicas':>10}{'load1':>7}"
            + "".join(f"{p + '_s':>11}" for p in PHASES))
    lines = [head, "-" * len(head)]
    for i, r in enumerate(rows):
        cells = "".join(f"{'-' if r[p] is None else format(r[p], '.2f'):>11}" for p in PHASES)
        lines.append(f"{r['stage']:<13}{i:>4}{r['replicas']:>10}{r['load1']:>7.2f}{cells}")
    for stage in dict.fromkeys(r["stage"] for r in rows):
        mine = [r for r in rows if r["stage"] == stage]
        for agg, fn in (("median", statistics.median), ("max", max)):
            cells = "".join(f"{fn([r[p] for r in mine if r[p] is not None] or [0]):>11.2f}"
                            for p in PHASES)
            lines.append(f"{stage:<13}{agg:>21}{cells}")
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    p = experiment_parser(__doc__, out=REPO / "docs" / "data_replica_startup.json", port=8311,
                          config=REPO / "serve_config.vlm.yaml")
    p.add_argument("--stages", nargs="*", default=["ImageEncoder", "LLMBackend"],
                   help="none: skip the replica part")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--num-cpus", type=int, default=2,
                   help="Ray logical CPUs (the config's replicas take 1.9 of 2; one more "
                        "encoder (0.05) or LLM replica (0.1) still fits)")
    p.add_argument("--timeout-s", type=float, default=600.0)
    p.add_argument("--node-joins", type=int, default=3,
                   help="times to start a Ray worker node (`ray start --address`) into a local "
                        "cluster and time it until ALIVE; 0: skip")
    p.add_argument("--keep-logs", action="store_true", help="keep the Ray temp dir (printed)")
    return p


def _image_url() -> str:
    from bench.workloads.chat_payloads import ImageUrls, image_size_px, trained_model_dir

    return ImageUrls(image_size_px(trained_model_dir(REPO / ".cache" / "models"))).url(0)


def run(a: argparse.Namespace) -> list[dict[str, Any]]:
    from bench.core.serve import start_ray, stop_ray

    config = fixed_stages(yaml.safe_load(a.config.read_text()))
    config["http_options"] = {**config.get("http_options", {}), "port": a.port}
    image_url = _image_url()  # an error here (no trained VLM) before Ray starts
    url = f"http://127.0.0.1:{a.port}"
    temp = tempfile.mkdtemp(prefix="rsu-")  # short: Ray's socket paths must fit
    start_ray(a.port, a.num_cpus, temp_dir=temp)
    try:
        t = time.time()
        deploy(with_replicas(config, a.stages[0], None))
        wait_app_running(a.timeout_s)
        ask(url, chat_body("ImageEncoder", image_url))  # warm: every stage has served once
        print(f"app RUNNING and answering after {time.time() - t:.1f} s", flush=True)
        rows = []
        for stage in a.stages:
            for _ in range(a.repeats):
                rows.append(measure_once(config, stage, url, image_url, a.timeout_s))
                print({k: rows[-1].get(k) for k in ("stage", "replica_id", *PHASES)}, flush=True)
        return rows
    finally:
        stop_ray()
        if a.keep_logs:
            print(f"Ray's logs: {temp}/session_latest/logs")
        else:
            shutil.rmtree(temp, ignore_errors=True)


def node_joins(n: int) -> list[float]:
    """Seconds from `ray start --address` of a 1-CPU worker node to the node ALIVE in the
    cluster (a 0-CPU head of its own; bench/core/cluster.py); each node stopped after."""
    from bench.core.cluster import local_cluster, node_ids, start_node
    cluster_wait = core_wait.wait_for

    out = []
    with local_cluster([], 1) as c:
        head = f"127.0.0.1:{c.nodes['head'].flag('--port')}"
        for i in range(n):
            name = f"join{i}"

            def alive(nm: str = name) -> bool:
                return nm in node_ids(c.dashboard)

            t = time.time()
            node = start_node(name, c.root, head, 1)
            try:
                cluster_wait(f"{name} ALIVE", alive, 120.0, every_s=0.1)
                out.append(round(time.time() - t, 2))
            finally:
                node.stop()
            print(f"worker node {name} ALIVE after {out[-1]} s", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    run_ = Run()
    # the parts this run measures replace those of an earlier file (a Result or a bare record)
    out = read_result(a.out)["data"] if a.out.is_file() else {}
    command = " ".join(["python -m bench replica-startup", *(argv or sys.argv[1:])])
    if a.node_joins:
        joins = node_joins(a.node_joins)
        out["node_join"] = {"seconds": joins, "load1": os.getloadavg()[0], "command": command}
        print(f"worker node start -> ALIVE: {joins} s (median {statistics.median(joins)})")
    if a.stages:
        rows = run(a)
        print(table(rows))
        restarted = sorted({n for r in rows for n in r["restarted_elsewhere"]})
        print(f"replicas of other deployments started during the scale-ups: "
              f"{restarted or 'none'}")
        out["replicas"] = {"config": str(a.config), "rows": rows, "command": command}
    run_.write(a.out, out, settings=settings_of(a))
    print(f"wrote {a.out}")
    return 0
