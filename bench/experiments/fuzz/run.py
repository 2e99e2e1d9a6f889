"""Fuzzing the HTTP API with schemathesis against a real running server (scripts/fuzz.sh; CI
runs it after the test suite, `.ci/run`).

A private local Ray (its own temp dir, `num_cpus` logical CPUs) serves the default app
(`serve_config.yaml`) on a free local port, with one random API key in `ADAPTSERVE_API_KEYS`
so that every request passes the auth path of the front door and the ingress. Once `/healthz`
answers 200, `schemathesis run <url>/openapi.json` fuzzes every operation the OpenAPI declares
for `max_time_s` seconds (schemathesis.toml at the repository root names the checks; the key
reaches it as the bearer token of the `bearer` security scheme the OpenAPI declares), and
the run fails on any failed check: a 5xx, a status code, content type, header or body the
OpenAPI does not declare for the operation, an unsupported method without 405 + `Allow`,
an operation that serves a request without a key. Ray is shut down afterwards (only the
instance started here); its logs are kept when the run failed.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.core import http
from bench.core import serve as lb
from bench.core.paths import REPO as REPO_ROOT
from bench.experiments.adaptive_vs_static.settings import LocalServe
from deployments.ingress.proxy.auth import KEYS_ENV

log = logging.getLogger(__name__)

TOML = REPO_ROOT / "schemathesis.toml"


@dataclass(frozen=True)
class FuzzSettings(LocalServe):
    config: Path = Path("serve_config.yaml")
    port: int = 8150  # the private Serve's HTTP port
    max_time_s: int = 180  # schemathesis' whole run (all phases)
    workers: int = 2  # schemathesis' concurrent workers
    num_cpus: int = 8  # Ray logical CPUs
    seed: int | None = None  # schemathesis' seed (None: a random one, printed in its summary)
    report_dir: Path = Path("results/fuzz")  # schemathesis' JUnit XML report
    grace_s: float = 120.0  # past max_time_s, before the schemathesis process is killed


def schemathesis_command(s: FuzzSettings) -> list[str]:
    """The `schemathesis run` command line (checks: schemathesis.toml)."""
    exe = Path(sys.executable).with_name("schemathesis")
    cmd = [str(exe) if exe.exists() else "schemathesis", "--config-file", str(TOML), "run",
           f"{s.base_url}/openapi.json", "--max-time", str(s.max_time_s),
           "--workers", str(s.workers), "--report", "junit",
           "--report-junit-path", str(s.report_dir / "junit.xml"), "--no-color"]
    if s.seed is not None:
        cmd += ["--seed", str(s.seed)]
    return cmd


def run_schemathesis(s: FuzzSettings, api_key: str) -> int:
    """Runs the fuzzer (its output goes to this process's stdout); its exit status."""
    s.report_dir.mkdir(parents=True, exist_ok=True)
    cmd = schemathesis_command(s)
    log.info("fuzzing %s for %d s: %s", s.base_url, s.max_time_s, " ".join(cmd))
    env = {**os.environ, KEYS_ENV: api_key}  # schemathesis.toml reads the bearer token here
    try:
        done = subprocess.run(cmd, env=env, cwd=REPO_ROOT, check=False, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=s.max_time_s + s.grace_s)
        print(plain_banners(done.stdout), flush=True)
        return done.returncode
    except subprocess.TimeoutExpired as e:
        out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else e.output
        print(plain_banners(out or ""), flush=True)
        log.error("schemathesis ran past %d s + %g s; killed", s.max_time_s, s.grace_s)
        return 124


def plain_banners(text: str) -> str:
    """schemathesis' output with its `=== ... ===` banners drawn in dashes: its last banner
    ("=== 1 warning in 120s ===") reads like a pytest summary with no test to CI log readers."""
    return re.sub(r"(?m)^=+( .* )=+$", lambda m: "---" + m.group(1) + "---", text)


def answer_counts(metrics_text: str) -> tuple[dict[str, dict[str, int]], dict[str, int]]:
    """From the server's /metrics: answers by route and status code (the ingress's count;
    refusals of the proxy's front door never reach it), items by classifier outcome."""
    from prometheus_client.parser import text_string_to_metric_families

    routes: dict[str, dict[str, int]] = {}
    items: dict[str, int] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == "adaptserve_http_requests_total":
                codes = routes.setdefault(sample.labels["route"], {})
                codes[sample.labels["code"]] = int(sample.value)
            elif sample.name == "adaptserve_items_total":
                outcome = sample.labels["outcome"]
                items[outcome] = items.get(outcome, 0) + int(sample.value)
    return routes, items


def answer_table(base_url: str, api_key: str) -> str:
    """How deep the fuzzer got: the ingress's answers by route and code, the models' items."""
    try:
        r = http.request("GET", f"{base_url}/metrics",
                         headers={"Authorization": f"Bearer {api_key}"}, timeout_s=10.0)
    except http.HttpTransportError as exc:
        return f"(no /metrics after the run: {exc})"
    if r.status_code != 200:
        return f"(/metrics answered {r.status_code} after the run)"
    routes, items = answer_counts(r.text)
    lines = ["answers the ingress gave during the run (route: code x count):"]
    for route, codes in sorted(routes.items()):
        counted = ", ".join(f"{c} x {n}" for c, n in sorted(codes.items()))
        lines.append(f"  {route:<10} {counted}")
    lines.append("items answered by the classifier replicas: "
                 + (", ".join(f"{k} {v}" for k, v in sorted(items.items())) or "none"))
    return "\n".join(lines)


def run_fuzz(s: FuzzSettings) -> int:
    """Serve, fuzz, shut down; 0 when every check passed."""
    api_key = secrets.token_urlsafe(32)
    os.environ[KEYS_ENV] = api_key  # before Ray starts: its proxy and ingress read it
    temp_dir = tempfile.mkdtemp(prefix="asfuzz-")  # short: Ray's socket paths live there
    args = lb.serve_args(s.config)
    t0 = time.perf_counter()
    status = 1
    lb.start_ray(s.port, s.num_cpus, temp_dir=temp_dir)
    try:
        log.info("deploying %s on %s (Ray temp dir %s)", s.config, s.base_url, temp_dir)
        log.info("healthy after %.0f s", lb.deploy_app(args, s.base_url))
        status = run_schemathesis(s, api_key)
        print(answer_table(s.base_url, api_key))
    finally:
        lb.stop_ray()
        os.environ.pop(KEYS_ENV, None)
    if status == 0:
        shutil.rmtree(temp_dir, ignore_errors=True)
    else:
        log.error("fuzzing failed (exit %d); the server's logs: %s/session_latest/logs",
                  status, temp_dir)
    log.info("fuzz run: %.0f s in all, exit %d", time.perf_counter() - t0, status)
    return status
