"""One real local Ray Serve app (all three model families) shared by the integration tests.

Ray runs with 2 CPUs and a small object store; replicas use fractional CPUs. The app is built
with `app.builder.build_app` (trains/profiles/plans on first use, cached under .cache/), served
on a free port, and torn down after the session (serve.shutdown + ray.shutdown).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.core import http
from bench.core.http import free_port
from bench.core.wait import wait_http_ok
from deployments.config import CLUSTER_ENV

FAMILIES = ("family", "vit", "fusion")
CHAT_MODEL = "vlm"
APP_NAME = "adaptserve-test"

TEST_ARGS: dict[str, Any] = {
    "http": {"max_body_bytes": 512 * 1024, "deadline_grace_s": 1.0, "request_timeout_s": 20.0,
             "ray_actor_options": {"num_cpus": 0.05}},
    "controller": {"interval_s": 0.5, "window_s": 3.0, "stale_after_s": 3.0},
    "classifiers": [
        # plans up to 400 req/s (the tests' loads; past it the top table serves): by default
        # RAMSIS plans up to the fastest variant's batched capacity, 10,000+ req/s for these
        # tiny nets, 85 MDPs and ~2 minutes of CI
        {"name": "family", "policy": "ramsis", "max_batch_size": 8, "max_queued_items": 64,
         "plan": {"max_qps": 400}, "ray_actor_options": {"num_cpus": 0.3}},
        {"name": "vit", "policy": "otas", "max_batch_size": 8, "max_queued_items": 64,
         "ray_actor_options": {"num_cpus": 0.3}},
        {"name": "fusion", "policy": "mosel", "max_batch_size": 8, "max_queued_items": 16,
         "ray_actor_options": {"num_cpus": 0.3}},
    ],
}
# the VLM on the transformers engine (starts in seconds; the vLLM engine has its own tests):
# the session's `vlm_dir` (tests/conftest.py), the tiny VLM where the trained one is not cached
GENERATION = {"model": CHAT_MODEL, "engine": "transformers",
              "encoder": {"num_replicas": 2, "ray_actor_options": {"num_cpus": 0.1}},
              "llm": {"ray_actor_options": {"num_cpus": 0.2}}}


@dataclass(frozen=True)
class Server:
    url: str

    def post(self, path: str, body: Any = None, raw: bytes | None = None,
             timeout: float = 30.0) -> http.HttpResponse:
        if raw is not None:
            return http.post_bytes(self.url + path, raw, timeout_s=timeout)
        return http.post_json(self.url + path, body, timeout_s=timeout)

    def get(self, path: str, timeout: float = 30.0) -> http.HttpResponse:
        return http.get(self.url + path, timeout_s=timeout)


def _wait_healthy(url: str, timeout_s: float = 120.0) -> None:
    wait_http_ok(url + "/healthz", timeout_s, every_s=0.5)


@pytest.fixture(scope="session")
def server(trained_models_dir: Path, vlm_dir: Path) -> Iterator[Server]:
    """The app on a fresh local Ray; the families and the VLM are trained (tests/conftest.py)
    before Ray takes the CPUs, and `build_app` finds the families current in the same cache and
    serves the VLM from `vlm_dir` (`generation.model_dir`)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.update(CLUSTER_ENV)  # as scripts/serve.sh runs Serve
    import ray
    from ray import serve

    from app.builder import build_app

    port = free_port()
    if ray.is_initialized():  # an earlier test's Ray left behind must not fail every test after it
        serve.shutdown()
        ray.shutdown()
    # address="local": always a fresh local Ray, never another session's cluster
    ray.init(address="local", num_cpus=2, object_store_memory=256 * 1024 * 1024,
             include_dashboard=False, namespace="adaptserve-tests", log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        args = {**TEST_ARGS, "generation": {**GENERATION, "model_dir": str(vlm_dir)}}
        serve.run(build_app(args), name=APP_NAME, route_prefix="/")
        url = f"http://127.0.0.1:{port}"
        _wait_healthy(url)
        yield Server(url)
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.fixture(scope="session")
def examples(trained_models_dir: Path) -> dict[str, dict[str, list[Any]]]:
    """Held-out test items in wire form per family and task (real data, no fakes)."""
    from deployments.models.registry import load_model

    out: dict[str, dict[str, list[Any]]] = {}
    for name in FAMILIES:
        model = load_model(name, cache_dir=trained_models_dir, device="cpu")
        out[name] = {t: model.examples("test", t, limit=64) for t in model.tasks()}
    return out


@pytest.fixture(scope="session")
def catalog(server: Server) -> dict[str, Any]:
    models = server.get("/v1/models").json()["models"]
    return {m["name"]: m for m in models}


def fastest_ms(catalog: dict[str, Any], family: str, task: str | None = None) -> float:
    info = catalog[family]
    t = next(x for x in info["tasks"] if x["task"] == (task or info["default_task"]))
    return float(t["fastest_latency_ms"])
