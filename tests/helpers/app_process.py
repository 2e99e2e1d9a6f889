"""An app served once in a process of its own (its own local Ray, never the session's shared
app), and the test side that runs such a process: the pattern of tests/integration/*_run.py.

    run side:   serve_once(args, name, answers, about_app) -> the run's record (JSON)
    test side:  run_module("tests.integration.x_run", [...], out) -> that record
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def serve_once(args: dict[str, Any], name: str, answers: Callable[[str], dict[str, Any]],
               about_app: Callable[[Any], dict[str, Any]] | None = None) -> dict[str, Any]:
    """`build_app(args)` served under "/" on a fresh local Ray until healthy; the record:
    build and deploy seconds, `about_app(app)`, `answers(base_url)` and the deployments."""
    from ray import serve

    from app.builder import build_app
    from bench.core.http import free_port
    from bench.core.serve import start_ray, stop_ray, wait_healthy

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    start_ray(port, 2, temp_dir=tempfile.mkdtemp(prefix=f"{name}-"))
    try:
        t = time.time()
        app = build_app(args)
        built_s = time.time() - t
        serve.run(app, name=name, route_prefix="/", blocking=False)
        wait_healthy(url + "/healthz", timeout_s=300.0)
        record = {"build_s": round(built_s, 1), "deploy_s": round(time.time() - t, 1),
                  **(about_app(app) if about_app else {}), **answers(url)}
        deployments = serve.status().applications[name].deployments
        # what Serve says of each deployment after the answers (a failure's first clue)
        return {**record, "deployments": sorted(deployments),
                "serve_status": {d: f"{s.status}: {s.message}"[:500]
                                 for d, s in deployments.items()}}
    finally:
        stop_ray()


def write_record(record: dict[str, Any], out: Path) -> int:
    out.write_text(json.dumps(record, indent=1))
    return 0


def run_module(module: str, argv: Sequence[str], out: Path,
               timeout_s: float = 600.0) -> dict[str, Any]:
    """`python -m module *argv` from the repo root (Ray's auth off); its record at `out`, or
    a failed assertion with the process's output."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", module, *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout_s)
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-5000:]
    record: dict[str, Any] = json.loads(out.read_text())
    return record
