"""`build_app(args) -> Application`: the serving graph (import path `app.builder:build_app`).

    ingress (FastAPI) -> classifier_<family> (one deployment per family; decodes its inputs)
           (or, with request_path.decode_at: preprocess, ingress -> preprocess -> classifier)
           \\-> controller <- classifier replicas report / fetch plans

Before binding, missing or stale artifacts are made (models trained, profiles measured, plans
built; all cached under `.cache/` of the node the builder runs on). The builder then hands each
deployment what it needs (`FamilyArtifacts`): profiles and plans as arguments (small), the model
as paths and their fingerprint (`ModelRef`): replicas load the weights themselves, from a path
every node must see (a shared volume or the image, docs/deploy.md), and refuse to start on files
other than the ones the builder profiled.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ray.serve import Application
from ray.serve.config import BackpressureConfig
from ray.serve.deployment import Deployment

from app.autoscaling import classifier_options, needs_stage_profile
from app.config import AppConfig, ClassifierConfig, HttpConfig, PathsConfig
from app.controller.controller import Controller
from deployments.classifier.deployment import Classifier
from deployments.classifier.policy_setup import TaskPlan, read_plan, read_task_plans
from deployments.ingress.classify.admission import FamilyCapacity
from deployments.ingress.classify.catalog import Catalog, family_info
from deployments.ingress.deployment import Ingress
from deployments.models.loading import ModelRef
from deployments.models.sources import BuiltinModel
from deployments.preprocess import Preprocess
from policies.profile import Profile
from policies.schedulers.plan_types import Plan
from policies.schedulers.registry import plan_kind
from profiling.paths import REPO_ROOT, plan_file, profile_file

log = logging.getLogger(__name__)


def load_config(args: dict[str, Any], root: Path = REPO_ROOT) -> AppConfig:
    """Validate the args and make the artifact paths absolute (replicas run in other dirs)."""
    cfg = AppConfig.model_validate(args or {})
    return cfg.model_copy(update={"paths": cfg.paths.resolved(root)})


def ensure_artifacts(cfg: AppConfig) -> None:
    """Train/profile/plan whatever is missing or stale (no-op when cached); a failure stops the
    build."""
    from profiling.artifacts import ensure_profiles

    p = cfg.paths
    for c in cfg.classifiers:
        source = c.source()
        if isinstance(source, BuiltinModel):
            from deployments.models.registry import ensure_trained

            ensure_trained(source.builtin, p.models_dir)
        profiles = ensure_profiles([c.name], p.models_dir, p.profiles_dir, tasks=c.tasks,
                                   progress=False, loader=profiling_loader(c, p.models_dir),
                                   threads=c.threads, device=profile_device(c))
        ensure_plan(c, cfg, profiles)


def profiling_loader(c: ClassifierConfig, models_dir: Path) -> Any:
    """(name, models_dir) -> the family with its held-out examples (the configured dataset,
    else the model's own), as `ensure_profiles` loads models."""
    from deployments.models.loading import load_source, source_paths

    source = c.source()
    paths = source_paths(source, models_dir)
    return lambda _name, _dir: load_source(c.name, source, paths[0] if paths else None,
                                           c.dataset)


def profile_device(c: ClassifierConfig) -> str:
    """Latency is profiled on the device the replicas run on: CUDA when they are given a GPU
    (`device: cuda`, or `auto` with `num_gpus`) and the builder's node has one; else on its CPU
    with a warning (the profile is then pessimistic until the replicas' latency feedback
    corrects it; its metadata names the hardware it was measured on)."""
    wants_gpu = c.device == "cuda" or (c.device == "auto"
                                       and float(c.ray_actor_options.get("num_gpus", 0)) > 0)
    if not wants_gpu:
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    log.warning("classifier %s: its replicas run on CUDA but this node has none: its latency "
                "profile is measured on the CPU (build on a GPU node, or profile there with "
                "`python -m app.cli profile` into a shared paths.profiles_dir)", c.name)
    return "cpu"


def ensure_plan(c: ClassifierConfig, cfg: AppConfig, profiles: Mapping[str, Path]) -> None:
    """The plan files a classifier's policy reads (none for plan-free policies). A profile that
    supports no plan of that kind leaves the file missing: replicas then run the fallback
    policy and say so (status, metric)."""
    from profiling.plans import PlanSettings, ensure_plans

    kind = plan_kind(c.policy)
    if kind is None:
        return
    settings = PlanSettings(slo_s=c.default_slo_ms / 1000.0, num_workers=c.num_replicas,
                            percentile=c.percentile, max_batch_size=c.max_batch_size,
                            max_qps=c.plan.max_qps, ramsis_max_queue=c.plan.max_queue,
                            ramsis_reward=c.plan.reward, ramsis_job_size=c.plan.job_size)
    ensure_plans(profiles, cfg.paths.plans_dir, settings, kinds=[kind])


@dataclass(frozen=True)
class FamilyArtifacts:
    """What a classifier deployment is handed: where the family's model is (`ModelRef`: paths
    and their fingerprint, never the weights), its modalities, each served task's profile (in
    the family's task order) and the plan its policy reads (none when it reads none)."""

    name: str
    model: ModelRef
    modalities: tuple[str, ...]
    profiles: Mapping[str, Profile]
    plans: Mapping[str, TaskPlan]


def family_artifacts(c: ClassifierConfig, paths: PathsConfig) -> FamilyArtifacts:
    from deployments.models.loading import load_source, model_ref
    from profiling.artifacts import load_profile

    ref = model_ref(c.name, c.source(), paths.models_dir)
    model = load_source(c.name, c.source(), Path(ref.paths[0]) if ref.paths else None, None)
    tasks = [t for t in model.tasks() if c.tasks is None or t in c.tasks]
    kind = plan_kind(c.policy)
    plan_paths = {} if kind is None else {t: plan_file(paths.plans_dir, c.name, t, kind)
                                          for t in tasks}
    return FamilyArtifacts(
        c.name, ref, tuple(model.modalities()),
        {t: load_profile(profile_file(paths.profiles_dir, c.name, t)) for t in tasks},
        read_task_plans(c.policy, plan_paths))


def task_plan(c: ClassifierConfig, paths: PathsConfig, task: str) -> Plan | None:
    """The plan `c`'s replicas read for `task` (None: its policy reads none, or the file is
    missing and the replicas run the fallback)."""
    kind = plan_kind(c.policy)
    return None if kind is None else read_plan(plan_file(paths.plans_dir, c.name, task, kind),
                                               kind)


def build_catalog(cfg: AppConfig, families: Mapping[str, FamilyArtifacts]) -> Catalog:
    return Catalog(tuple(
        family_info(c.name, families[c.name].modalities, dict(families[c.name].profiles),
                    c.policy, c.percentile, c.max_batch_size) for c in cfg.classifiers))


def classifier_deployment_name(family: str) -> str:
    return f"Classifier_{family}"


def _deployment(cls: Any) -> Deployment:
    """The `@serve.deployment` classes, typed as what they are at runtime."""
    return cast(Deployment, cls)


def with_env(options: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """Ray actor options with `env` merged into their runtime_env's env_vars (the options'
    own values win)."""
    out = dict(options)
    runtime_env = dict(out.get("runtime_env") or {})
    runtime_env["env_vars"] = {**env, **(runtime_env.get("env_vars") or {})}
    out["runtime_env"] = runtime_env
    return out


def bind_graph(cfg: AppConfig, catalog: Catalog,
               families: Mapping[str, FamilyArtifacts]) -> Application:
    data = cfg.model_dump(mode="json")
    env = cfg.request_path.replica_env
    side = with_env(cfg.http.ray_actor_options, env)
    transport = cfg.request_path.handle_transport
    controller = _deployment(Controller).options(
        ray_actor_options=side, logging_config={"enable_access_log": False},
    ).bind(data, {n: dict(f.plans) for n, f in families.items()})
    classifiers = {
        c.name: _deployment(Classifier).options(
            name=classifier_deployment_name(c.name),
            **classifier_options(c, families[c.name].profiles),
            ray_actor_options=with_env(c.ray_actor_options, env),
            max_ongoing_requests=max(2 * c.max_queued_items, 64),
            health_check_period_s=c.health_check_period_s,
            logging_config={"enable_access_log": False},
        ).bind(c.model_dump(mode="json"), families[c.name].model,
               dict(families[c.name].profiles), dict(families[c.name].plans),
               data["controller"], controller)
        for c in cfg.classifiers}
    probes: dict[str, Any] = {classifier_deployment_name(n): h for n, h in classifiers.items()}
    routes: dict[str, Any] = dict(classifiers)
    if cfg.request_path.decode_at == "preprocess":
        preprocess = _deployment(Preprocess).options(
            num_replicas=cfg.http.preprocess_replicas, ray_actor_options=side,
            max_ongoing_requests=cfg.http.max_ongoing_requests,
            logging_config={"enable_access_log": False},
        ).bind({c.name: families[c.name].model for c in cfg.classifiers}, classifiers,
               cfg.http.deadline_grace_s, transport)
        routes = {n: preprocess for n in classifiers}
        probes["Preprocess"] = preprocess
    chat = None
    if cfg.generation is not None:
        from app.chat_graph import bind_chat, chat_model_dir

        chat = bind_chat(cfg.generation, chat_model_dir(cfg.generation, cfg.paths.models_dir),
                         lambda options: with_env(options, env), cfg.paths.profiles_dir,
                         REPO_ROOT)
        probes.update(chat.probes())
    return _deployment(Ingress).options(**ingress_options(cfg.http, env)).bind(
        catalog, data["http"], data["request_path"], routes, probes, controller,
        family_capacity(cfg), classifiers, chat)


def ingress_options(http: HttpConfig, env: Mapping[str, str]) -> dict[str, Any]:
    """Serve's own admission for the ingress: beyond `max_ongoing_requests` per replica the
    proxy queues at most `max_queued_requests` and refuses the rest itself (status and
    Retry-After from the config), without running the ingress's Python."""
    return {"num_replicas": http.num_replicas,
            "ray_actor_options": with_env(http.ray_actor_options, env),
            "max_ongoing_requests": http.max_ongoing_requests,
            "max_queued_requests": (-1 if http.max_queued_requests is None
                                    else http.max_queued_requests),
            "backpressure_config": BackpressureConfig(
                status_code=http.backpressure_status_code,
                retry_after_s=http.backpressure_retry_after_s)}


def family_capacity(cfg: AppConfig) -> dict[str, FamilyCapacity]:
    return {c.name: FamilyCapacity(c.num_replicas, c.max_queued_items) for c in cfg.classifiers}


def build_app(args: dict[str, Any]) -> Application:
    """Serve's application builder: validate args, make artifacts, bind the graph."""
    cfg = load_config(args)
    if cfg.ensure_artifacts:
        ensure_artifacts(cfg)
    families = {c.name: family_artifacts(c, cfg.paths) for c in cfg.classifiers}
    catalog = build_catalog(cfg, families)
    log.info("serving %s", catalog.names())
    return bind_graph(cfg, catalog, families)


def prepare(config_path: Path, app_name: str | None = None) -> AppConfig:
    """Make the artifacts of an application in a Serve config file (scripts/serve.sh runs this
    before `serve run`, so the first start does not train inside Serve's build task)."""
    import yaml

    doc = yaml.safe_load(Path(config_path).read_text())
    apps = [a for a in doc.get("applications", [])
            if a.get("import_path") == "app.builder:build_app"
            and (app_name is None or a.get("name") == app_name)]
    if not apps:
        raise ValueError(f"{config_path}: no application with import_path app.builder:build_app")
    cfg = load_config(apps[0].get("args") or {})
    ensure_artifacts(cfg)
    if cfg.generation is not None and cfg.generation.model_dir is None:
        from deployments.models.vlm.cache import ensure_vlm

        log.info("the VLM: %s", ensure_vlm(Path(cfg.paths.models_dir)))  # trains on first use
    if cfg.generation is not None and needs_stage_profile(cfg.generation):
        from profiling.stages import ensure_stage_profiles, settings_from_serve_config

        log.info("stage profile (autoscaling capacities): %s", ensure_stage_profiles(
            settings_from_serve_config(Path(config_path)), Path(cfg.paths.models_dir),
            Path(cfg.paths.profiles_dir)))
    return cfg


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="train/profile/plan what a Serve config needs")
    parser.add_argument("config", type=Path, help="serve_config.yaml")
    parser.add_argument("--app", help="application name (default: the first adaptserve app)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    cfg = prepare(args.config, args.app)
    log.info("artifacts ready for %s", [c.name for c in cfg.classifiers])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
