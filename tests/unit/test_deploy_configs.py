"""The shipped Serve configs (serve_config.yaml, the KubeRay RayService) validate as AppConfig."""

from __future__ import annotations

from pathlib import Path

import yaml

from app.config import AppConfig

ROOT = Path(__file__).resolve().parents[2]


def _apps(doc: dict) -> list[dict]:
    return [a for a in doc["applications"] if a["import_path"] == "app.builder:build_app"]


def test_serve_config_args_validate() -> None:
    apps = _apps(yaml.safe_load((ROOT / "serve_config.yaml").read_text()))
    assert apps
    for app in apps:
        cfg = AppConfig.model_validate(app["args"])
        assert {c.name for c in cfg.classifiers} == {"ladder", "scenevit", "scenefusion"}


def test_vlm_config_is_the_default_plus_generation() -> None:
    """serve_config.vlm.yaml (the README's VLM command) differs from serve_config.yaml only by
    its `generation:` section, which validates."""
    base = yaml.safe_load((ROOT / "serve_config.yaml").read_text())
    vlm = yaml.safe_load((ROOT / "serve_config.vlm.yaml").read_text())
    args = _apps(vlm)[0]["args"]
    cfg = AppConfig.model_validate(args)
    assert cfg.generation is not None and cfg.generation.mode == "disaggregated"
    assert {k: v for k, v in args.items() if k != "generation"} == _apps(base)[0]["args"]
    vlm["applications"][0]["args"].pop("generation")
    policy = vlm["applications"][0].pop("autoscaling_policy")  # the stages sized together
    assert policy == {"policy_function": "deployments.autoscaling.serve_hooks:CoordinatedPolicy"}
    assert vlm == base
    # every replica fits on the 2-core machine `scripts/run.sh` starts Ray on (Ray's CPU count),
    # autoscaled stages at their maximum
    g, stages = cfg.generation, 0.0
    for stage in (g.encoder, g.llm):
        most = stage.num_replicas if stage.autoscaling is None else stage.autoscaling.max_replicas
        stages += most * stage.ray_actor_options.get("num_cpus", 1)
    classifiers = sum(c.num_replicas * c.ray_actor_options.get("num_cpus", 1)
                      for c in cfg.classifiers)
    # + the ingress's and the controller's 0.1 each
    assert classifiers + stages + 0.2 <= 2.0 + 1e-9


def test_rayservice_serve_config_validates_and_matches_families() -> None:
    service = yaml.safe_load((ROOT / "deploy" / "rayservice.yaml").read_text())
    apps = _apps(yaml.safe_load(service["spec"]["serveConfigV2"]))
    assert apps
    for app in apps:
        cfg = AppConfig.model_validate(app["args"])
        assert {c.name for c in cfg.classifiers} == {"ladder", "scenevit", "scenefusion"}


def test_rayservice_admission_matches_serve_config() -> None:
    """The front door's admission and clock keys are the same on a laptop and on KubeRay."""
    local = _apps(yaml.safe_load((ROOT / "serve_config.yaml").read_text()))[0]["args"]["http"]
    service = yaml.safe_load((ROOT / "deploy" / "rayservice.yaml").read_text())
    kube = _apps(yaml.safe_load(service["spec"]["serveConfigV2"]))[0]["args"]["http"]
    placement = {"ray_actor_options", "num_replicas", "preprocess_replicas"}
    assert {k: v for k, v in local.items() if k not in placement} == \
        {k: v for k, v in kube.items() if k not in placement}


def test_ingress_options_give_serve_the_proxy_bounds() -> None:
    from app.builder import ingress_options
    from deployments.ingress.config import HttpConfig
    from deployments.ingress.deployment import Ingress

    http = HttpConfig(max_ongoing_requests=40, max_queued_requests=10,
                      backpressure_status_code=429, backpressure_retry_after_s=2)
    d = Ingress.options(**ingress_options(http, {}))
    assert (d.max_ongoing_requests, d.max_queued_requests) == (40, 10)
    assert (d.backpressure_config.status_code, d.backpressure_config.retry_after_s) == (429, 2)
    unbounded = Ingress.options(**ingress_options(HttpConfig(max_queued_requests=None), {}))
    assert unbounded.max_queued_requests == -1


def test_serve_throughput_env_is_set_wherever_ray_starts() -> None:
    """The proxy's gRPC and Serve's event-loop settings (CLUSTER_ENV) are cluster-wide: every
    way this repo starts Ray sets them, with the same values."""
    from deployments.config import CLUSTER_ENV

    script = (ROOT / "scripts" / "serve.sh").read_text()
    for name, value in CLUSTER_ENV.items():
        assert f"{name}={value}" in script, name
    for manifest in ("rayservice.yaml", "rayservice-gpu.yaml"):
        service = yaml.safe_load((ROOT / "deploy" / manifest).read_text())
        cluster = service["spec"]["rayClusterConfig"]
        groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
        for group in groups:
            env = group["template"]["spec"]["containers"][0]["env"]
            # literal values are exactly CLUSTER_ENV; secrets (API keys) come by valueFrom
            assert {e["name"]: e["value"] for e in env if "value" in e} == CLUSTER_ENV
