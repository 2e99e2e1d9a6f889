"""The run behind tests/integration/test_autoscale_classifier.py, in a process of its own (its
own local Ray, never the session's shared app):

    python -m tests.integration.autoscale_classifier_run OUT.json

One classifier (`family`, plan-free policy) with `autoscaling:` said to carry CAPACITY_PER_S
items/s, deployed with `serve.run(build_app(args))` (each deployment runs its own StagePolicy);
/v1/classify driven open-loop at ~4x that for LOAD_S (longer, up to MAX_LOAD_S, until a second
replica is RUNNING), then quiet until the target is back to 1 (at most QUIET_S). Replicas by
state (serve.status()) and the policy's decisions (/v1/status `autoscaling`) sampled every
SAMPLE_S; every request's outcome; the ingress's classify count. Written as JSON to OUT."""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

FAMILY = "family"
DEPLOYMENT = f"Classifier_{FAMILY}"
APP = "adaptserve-autoscale"
CAPACITY_PER_S = 5.0
RATE_PER_S = 20.0  # ~4x capacity
LOAD_S, MAX_LOAD_S, QUIET_S, SAMPLE_S = 25.0, 60.0, 40.0, 0.5
SLO_MS = 2000.0
ARGS: dict[str, Any] = {
    "http": {"max_body_bytes": 512 * 1024, "deadline_grace_s": 1.0, "request_timeout_s": 20.0,
             "ray_actor_options": {"num_cpus": 0.05}},
    "controller": {"interval_s": 0.5, "window_s": 3.0, "stale_after_s": 3.0},
    "classifiers": [
        {"name": FAMILY, "policy": "most_accurate", "max_batch_size": 8, "max_queued_items": 64,
         "ray_actor_options": {"num_cpus": 0.3},
         "autoscaling": {"min_replicas": 1, "max_replicas": 2, "capacity_per_s": CAPACITY_PER_S,
                         "scale_down_delay_s": 3.0, "startup_s": 2.0,
                         "look_back_period_s": 2.0, "metrics_interval_s": 0.5,
                         "rate_window_s": 2.0}}],
}


def bodies() -> list[dict[str, Any]]:
    """Held-out test items of the family (real data), one request each."""
    from deployments.models.cache import DEFAULT_MODELS_DIR
    from deployments.models.registry import load_model

    model = load_model(FAMILY, cache_dir=DEFAULT_MODELS_DIR, device="cpu")
    out = []
    for task in model.tasks():
        out += [{"model": FAMILY, "task": task, "inputs": ex.inputs, "slo": {"latency_ms": SLO_MS}}
                for ex in model.examples("test", task, limit=32)]
    return out


def replicas() -> dict[str, int]:
    from ray import serve

    app = serve.status().applications.get(APP)
    if app is None or DEPLOYMENT not in app.deployments:
        return {}
    return {str(getattr(k, "value", k)): int(v)
            for k, v in app.deployments[DEPLOYMENT].replica_states.items()}


async def decision(session: aiohttp.ClientSession, url: str) -> dict[str, Any] | None:
    try:
        async with session.get(url + "/v1/status", timeout=aiohttp.ClientTimeout(5)) as r:
            body = await r.json()
        return ((body.get("autoscaling") or {}).get("deployments") or {}).get(DEPLOYMENT)
    except (aiohttp.ClientError, OSError, TimeoutError, ValueError):
        return None


async def classify_count(session: aiohttp.ClientSession, url: str) -> int:
    async with session.get(url + "/metrics") as r:
        text = await r.text()
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("adaptserve_http_requests_total{")
                   and 'route="classify"' in line))


async def one(session: aiohttp.ClientSession, url: str, body: dict[str, Any],
              t0: float) -> dict[str, Any]:
    start = time.time()
    rec: dict[str, Any] = {"sent_s": round(start - t0, 3)}
    try:
        async with session.post(url + "/v1/classify", json=body) as r:
            rec["http_status"] = r.status
            raw = await r.read()
        try:
            doc = json.loads(raw)
            rec["ok"] = r.status == 200 and doc.get("status") == "ok"
            rec["error_type"] = ((doc.get("error") or {}).get("type")
                                 if isinstance(doc.get("error"), dict) else doc.get("error"))
        except ValueError:
            rec["ok"], rec["not_json"] = False, raw[:200].decode("utf-8", "replace")
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        rec["transport_error"] = f"{type(exc).__name__}: {exc}"
    rec["latency_s"] = round(time.time() - start, 3)
    return rec


class Run:
    def __init__(self, url: str) -> None:
        self.url, self.t0 = url, time.time()
        self.samples: list[dict[str, Any]] = []
        self.loading = True

    def last_running(self) -> int:
        return self.samples[-1]["replicas"].get("RUNNING", 0) if self.samples else 0

    def last_target(self) -> int | None:
        d = self.samples[-1]["decision"] if self.samples else None
        return None if d is None else int(d["target"])

    async def sample(self, session: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        while not stop.is_set():
            d = await decision(session, self.url)
            reps = await asyncio.to_thread(replicas)
            self.samples.append({"t_s": round(time.time() - self.t0, 2), "loading": self.loading,
                                 "replicas": reps, "decision": d})
            await asyncio.sleep(SAMPLE_S)

    async def load(self, session: aiohttp.ClientSession, items: list[dict[str, Any]]) -> list:
        tasks, i, start = [], 0, time.time()
        while True:
            t = time.time() - start
            if t >= MAX_LOAD_S or (t >= LOAD_S and self.last_running() >= 2):
                break
            tasks.append(asyncio.create_task(one(session, self.url, items[i % len(items)],
                                                 self.t0)))
            i += 1
            await asyncio.sleep(max(0.0, start + i / RATE_PER_S - time.time()))
        self.loading = False
        return list(await asyncio.gather(*tasks))

    async def quiet(self) -> float | None:
        """Seconds after the load until the target is back to 1 (None: not within QUIET_S)."""
        end = time.time()
        while time.time() - end < QUIET_S:
            await asyncio.sleep(SAMPLE_S)
            if self.last_target() == 1 and not self.samples[-1]["loading"]:
                return round(time.time() - end, 2)
        return None


async def drive(url: str, items: list[dict[str, Any]]) -> dict[str, Any]:
    run = Run(url)
    timeout = aiohttp.ClientTimeout(total=30.0)
    async with aiohttp.ClientSession(timeout=timeout,
                                     connector=aiohttp.TCPConnector(limit=0)) as session:
        for body in items[:4]:  # warm: one answer each before the clock starts
            await one(session, url, body, run.t0)
        await asyncio.sleep(4.0)  # the warm requests leave the rate window
        before = await classify_count(session, url)
        stop = asyncio.Event()
        sampler = asyncio.create_task(run.sample(session, stop))
        records = await run.load(session, items)
        load_s = round(time.time() - run.t0, 2)
        back_to_one_s = await run.quiet()
        stop.set()
        await sampler
        served = await classify_count(session, url) - before
    return {"records": records, "samples": run.samples, "load_s": load_s,
            "back_to_one_after_load_s": back_to_one_s, "counted_by_ingress": served}


def main(out: Path) -> int:
    from ray import serve

    from app.builder import build_app
    from bench.core.http import free_port
    from bench.core.serve import start_ray, stop_ray, wait_healthy

    items = bodies()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    start_ray(port, 2, temp_dir=tempfile.mkdtemp(prefix="autoscale-cls-"))
    try:
        t = time.time()
        serve.run(build_app(ARGS), name=APP, route_prefix="/", blocking=False)
        wait_healthy(url + "/healthz", timeout_s=180.0)
        result = {"deploy_s": round(time.time() - t, 1), **asyncio.run(drive(url, items))}
    finally:
        stop_ray()
    out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
