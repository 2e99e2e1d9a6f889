"""The autoscaling burst demonstration (python -m bench autoscaling-burst, docs/autoscaling.md):
serve_config.vlm.yaml's app, autoscaled stages and the coordinating application policy, on a
private local Ray with 2 logical CPUs, deployed as `serve run` / `serve deploy` deploy a config
(`deploy_apps`: Serve takes the application-level `autoscaling_policy` only from a config); light
text traffic throughout, an image burst in the middle (chat requests with several images each),
then quiet; replicas and the policy's decisions sampled every `sample_s`.

Nothing here decides: the policies (deployments/autoscaling/) run inside Serve's controller.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.core import http
from bench.core.stream_client import Prepared
from bench.core.wait import http_ok, wait_for
from bench.workloads.chat import GenRequest
from bench.workloads.chat_payloads import ImageUrls, ModelSetup, body

APP = "adaptserve"
STAGES = ("ImageEncoder", "LLMBackend")


@dataclass(frozen=True)
class BurstSpec:
    warm_s: float = 20.0  # text only
    burst_s: float = 60.0  # text + image requests
    quiet_s: float = 50.0  # text only again
    text_rps: float = 2.0
    burst_rps: float = 2.5
    images_per_request: int = 6
    max_tokens: int = 8
    slo_ms: float = 2000.0
    seed: int = 0

    @property
    def duration_s(self) -> float:
        return self.warm_s + self.burst_s + self.quiet_s

    def phase(self, t_s: float) -> str:
        if t_s < self.warm_s:
            return "warm"
        return "burst" if t_s < self.warm_s + self.burst_s else "quiet"


@dataclass(frozen=True)
class DemoScaling:
    """The demo's autoscaling settings (short enough that it fits in a few minutes)."""

    encoder_capacity_per_s: float = 100.0  # image tokens/s one encoder is said to carry
    llm_capacity_per_s: float | None = None  # None: the stage profile's
    encoder_max: int = 4
    llm_max: int = 2
    target_utilization: float = 0.8
    scale_down_delay_s: float = 10.0
    encoder_startup_s: float = 20.0  # a new encoder replica serves ~15-40 s later here
    llm_startup_s: float = 45.0
    look_back_period_s: float = 2.0
    metrics_interval_s: float = 0.5
    rate_window_s: float = 2.0
    engine: str = "vllm"


def _stage(a: DemoScaling, capacity: float | None, hi: int, startup_s: float
           ) -> dict[str, Any]:
    out: dict[str, Any] = {
        "min_replicas": 1, "max_replicas": hi, "target_utilization": a.target_utilization,
        "scale_down_delay_s": a.scale_down_delay_s, "startup_s": startup_s,
        "look_back_period_s": a.look_back_period_s, "metrics_interval_s": a.metrics_interval_s,
        "rate_window_s": a.rate_window_s}
    if capacity is not None:
        out["capacity_per_s"] = capacity
    return out


def demo_config(doc: dict[str, Any], port: int, a: DemoScaling,
                model_dir: str | None = None) -> dict[str, Any]:
    """serve_config.vlm.yaml's document with the demo's port, one idle classifier (the app needs
    one: its last, the lightest to start) and the stages' autoscaling settings; its
    application policy kept."""
    out = copy.deepcopy(doc)
    out["http_options"] = {**out.get("http_options", {}), "port": port}
    [app] = [x for x in out["applications"] if x["name"] == APP]
    args = app["args"]
    args["classifiers"] = [{**args["classifiers"][-1], "ray_actor_options": {"num_cpus": 0.1}}]
    g = args["generation"]
    g["engine"] = a.engine
    if a.engine == "transformers":  # it takes only max_model_len of vLLM's settings
        g["engine_settings"] = {k: v for k, v in g.get("engine_settings", {}).items()
                                if k == "max_model_len"}
    if model_dir is not None:
        g["model_dir"] = model_dir
    g.pop("history", None)  # the demo starts from the config's sizes, not a past run
    g["encoder"] = {**g["encoder"], "num_replicas": 1, "autoscaling": _stage(
        a, a.encoder_capacity_per_s, a.encoder_max, a.encoder_startup_s)}
    g["llm"] = {**g["llm"], "num_replicas": 1, "autoscaling": _stage(
        a, a.llm_capacity_per_s, a.llm_max, a.llm_startup_s)}
    out["applications"] = [app]
    return out


def burst_requests(spec: BurstSpec, setup: ModelSetup, urls: ImageUrls,
                   model: str) -> list[Prepared]:
    """Poisson text requests over the whole run, Poisson image requests (each with
    `images_per_request` held-out digits) during the burst; seeded."""
    rng = np.random.default_rng(spec.seed)

    def poisson(rate: float, start: float, end: float) -> list[float]:
        n = rng.poisson(rate * (end - start))
        return sorted(rng.uniform(start, end, n).tolist())

    text = [(t, 0) for t in poisson(spec.text_rps, 0.0, spec.duration_s)]
    burst_end = spec.warm_s + spec.burst_s
    images = [(t, spec.images_per_request)
              for t in poisson(spec.burst_rps, spec.warm_s, burst_end)]
    out = []
    for i, (t, n) in enumerate(sorted(text + images)):
        if n == 0:
            q, ans = setup.pool.facts[int(rng.integers(len(setup.pool.facts)))]
            req = GenRequest(i, t, "arithmetic", q, ans, (), (), spec.max_tokens, False)
        else:
            ids = tuple(int(x) for x in rng.choice(len(setup.pool.digit_words), n,
                                                   replace=False))
            req = GenRequest(i, t, "sequence", setup.pool.sequence_question,
                             " ".join(setup.pool.digit_words[x] for x in ids), ids, (),
                             spec.max_tokens, True)
        out.append(Prepared(i, t, body(req, urls, model), req.answer, req.task, n, 0, n > 0))
    return out


def warm_requests(setup: ModelSetup, urls: ImageUrls, model: str, max_tokens: int
                  ) -> list[Prepared]:
    """One text request and one with a single image: every path has served once before the
    run, without an image load that would itself scale the encoders."""
    q, ans = setup.pool.facts[0]
    text = GenRequest(0, 0.0, "arithmetic", q, ans, (), (), max_tokens, False)
    image = GenRequest(1, 0.0, "digit", setup.pool.digit_question, setup.pool.digit_words[0],
                       (0,), (), max_tokens, False)
    return [Prepared(r.index, 0.0, body(r, urls, model), r.answer, r.task, r.num_images, 0,
                     False) for r in (text, image)]


def deploy(doc: dict[str, Any]) -> None:
    """As `serve deploy` / `serve run CONFIG` do (Serve's client; the app-level policy needs
    a config)."""
    from ray.serve.context import _get_global_client
    from ray.serve.schema import ServeDeploySchema

    client = _get_global_client()
    if client is None:
        raise RuntimeError("Serve is not started (start_ray first)")
    client.deploy_apps(ServeDeploySchema.model_validate(doc), _blocking=False)


def wait_running(url: str, timeout_s: float) -> float:
    """Seconds until the app is RUNNING and /healthz answers 200 (DEPLOY_FAILED raises)."""
    from ray import serve

    def running() -> bool:
        app = serve.status().applications.get(APP)
        if app is not None and str(app.status).endswith("DEPLOY_FAILED"):
            raise RuntimeError(f"deploy failed: {app.message}")
        return (app is not None and str(app.status).endswith("RUNNING")
                and http_ok(url + "/healthz"))

    t0 = time.time()
    wait_for(f"{APP} RUNNING and healthy", running, timeout_s)
    return time.time() - t0


def replica_counts() -> dict[str, dict[str, int]]:
    """Per stage, replicas by state as `serve.status()` shows them (it has no target count)."""
    from ray import serve

    app = serve.status().applications.get(APP)
    if app is None:
        return {}
    return {d: {str(getattr(k, "value", k)): int(v)
                for k, v in app.deployments[d].replica_states.items()}
            for d in STAGES if d in app.deployments}


def decisions(url: str) -> dict[str, Any]:
    """The policy's last decision per deployment, from /v1/status."""
    try:
        r = http.get(url + "/v1/status", timeout_s=5.0)
        return dict(((r.json() or {}).get("autoscaling") or {}).get("deployments") or {})
    except (http.HttpTransportError, ValueError):
        return {}


class Sampler:
    """Samples replicas and decisions every `every_s` on a thread until stopped."""

    def __init__(self, url: str, every_s: float = 1.0) -> None:
        self.url, self.every_s = url, every_s
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.t0 = time.time()

    def start(self, t0: float) -> None:
        self.t0 = t0
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.time()
            try:
                self.samples.append({"t_s": round(t - self.t0, 2), "replicas": replica_counts(),
                                     "decisions": decisions(self.url)})
            except Exception as exc:  # keep sampling; a missed sample shows as a gap
                self.samples.append({"t_s": round(t - self.t0, 2), "error": str(exc)[:200]})
            self._stop.wait(max(0.0, self.every_s - (time.time() - t)))

    def stop(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._thread.join(timeout=10.0)
        return self.samples


def chat_answers(url: str) -> int:
    """Chat requests the ingress answered so far (its /metrics, every status code)."""
    text = http.get(url + "/metrics", timeout_s=10.0).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("adaptserve_http_requests_total{") and 'route="chat"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def settings_json(spec: BurstSpec, scaling: DemoScaling) -> dict[str, Any]:
    return {"spec": asdict(spec), "scaling": asdict(scaling)}


def encode_latency_s(app: str = APP) -> float | None:
    """The encoder replicas' batch-of-1 time (their running average), for the history."""
    from ray import serve

    try:
        stats = serve.get_deployment_handle("ImageEncoder", app).stats.remote().result(
            timeout_s=10.0)
        ms = stats["batch_ms"].get(1)
        return None if ms is None else float(ms) / 1000.0
    except Exception:
        return None


def model_dir_of(setup: ModelSetup) -> str:
    return str(Path(setup.model_dir))
