"""Serve's `AutoscalingConfig` for every deployment with `autoscaling:` (docs/autoscaling.md):
the policy (deployments/autoscaling/serve_hooks.py:StagePolicy) with its kwargs, each replica's
capacity from the config (`capacity_per_s`) or from the profile (the generation stages'
profile, profiling/stages.py; a classifier's latency profile at its largest batch within the
SLO), and the initial replicas from history (policies.autoscaling.initial_replicas over a past
run's JSON, `generation.history`) or the config.

`scaling_options(...)` gives a deployment's `.options()` replica keys: `num_replicas` without
autoscaling, `autoscaling_config` with it.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

from ray.serve.config import AutoscalingConfig, AutoscalingPolicy

from deployments.autoscaling.config import AutoscalingSettings, ClassifierAutoscaling
from deployments.classifier.config import ClassifierConfig
from deployments.ingress.chat.config import GenerationConfig
from policies.autoscaling import ENCODER, LLM, AppScalingSettings, History, initial_replicas
from policies.autoscaling.history import history_from_json, items_capacity_per_s
from policies.generation.stage_profile import StageProfiles
from policies.profile import LatencyModel, Profile

log = logging.getLogger(__name__)
STAGE_POLICY = "deployments.autoscaling.serve_hooks:StagePolicy"
APP_POLICY = "deployments.autoscaling.serve_hooks:CoordinatedPolicy"


def serve_autoscaling(a: AutoscalingSettings, kwargs: Mapping[str, Any],
                      initial: int) -> AutoscalingConfig:
    """Serve's delays are 0 and its scaling factors 1: the policy's hysteresis is the only
    one. `metrics_interval_s` is what Serve 2.60 pushes replica reports by (deprecated there
    in favour of env vars it does not read yet)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return AutoscalingConfig(
            min_replicas=a.min_replicas, max_replicas=a.max_replicas, initial_replicas=initial,
            look_back_period_s=a.look_back_period_s, metrics_interval_s=a.metrics_interval_s,
            upscale_delay_s=0.0, downscale_delay_s=0.0,
            policy=AutoscalingPolicy(  # type: ignore[no-untyped-call]
                policy_function=STAGE_POLICY, policy_kwargs={**a.policy_kwargs(), **kwargs}))


def bounded(n: int, a: AutoscalingSettings) -> int:
    return min(a.max_replicas, max(a.min_replicas, n))


def own_initial(num_replicas: int, a: AutoscalingSettings) -> int:
    return a.initial_replicas if a.initial_replicas is not None else bounded(num_replicas, a)


def load_history(path: str | Path | None, root: Path) -> History | None:
    """The history at `path` (relative: to `root`); None when unset or missing (logged)."""
    if path is None:
        return None
    p = Path(path) if Path(path).is_absolute() else root / path
    if not p.is_file():
        log.info("no autoscaling history at %s: initial replicas from the config", p)
        return None
    return history_from_json(json.loads(p.read_text()))


def load_stage_profiles(profiles_dir: Path, model: str) -> StageProfiles | None:
    from profiling.paths import stage_profile_file
    from profiling.stages import load_stage_profiles as load

    path = stage_profile_file(profiles_dir, model)
    return load(path) if path.is_file() else None


def needs_stage_profile(g: GenerationConfig) -> bool:
    """Whether an autoscaled stage reads its capacity from the stage profile."""
    stages = [g.llm.autoscaling] + ([g.encoder.autoscaling] if g.mode == "disaggregated" else [])
    return any(a is not None and a.capacity_per_s is None for a in stages)


def stage_capacities(g: GenerationConfig, profiles: StageProfiles | None) -> dict[str, float]:
    """Tokens/s one replica of each autoscaled stage carries within the SLO."""
    out: dict[str, float] = {}
    slo = g.limits.default_ttft_slo_ms
    enc = g.encoder.autoscaling if g.mode == "disaggregated" else None
    llm = g.llm.autoscaling
    if enc is not None:
        out[ENCODER] = enc.capacity_per_s or _need(profiles, "encoder").encoder \
            .capacity_tokens_per_s(enc.slo_ms or slo, enc.latency_share,
                                   max_batch_images=g.encoder.max_batch_images)
    if llm is not None:
        out[LLM] = llm.capacity_per_s or _need(profiles, "llm").llm.capacity_tokens_per_s(
            llm.ttft_slo_ms or slo, llm.tbt_slo_ms, llm.decode_tokens_per_prompt_token,
            llm.latency_share)
    return out


def _need(profiles: StageProfiles | None, stage: str) -> StageProfiles:
    if profiles is None:
        raise ValueError(f"generation.{stage}.autoscaling has no capacity_per_s and there is no "
                         "stage profile: run `adaptserve profile --stages` or set it")
    return profiles


def stage_initials(g: GenerationConfig, capacities: Mapping[str, float],
                   history: History | None, tokens_per_image: int) -> dict[str, int]:
    """Initial replicas of the autoscaled stages: from history when there is one (both stages
    sized by it), else each stage's own."""
    enc, llm = g.encoder.autoscaling, g.llm.autoscaling
    out: dict[str, int] = {}
    if enc is not None and ENCODER in capacities:
        out[ENCODER] = own_initial(g.encoder.num_replicas, enc)
    if llm is not None:
        out[LLM] = own_initial(g.llm.num_replicas, llm)
    if history is None or not out:
        return out
    from deployments.autoscaling.decisions import rule_from_kwargs

    def settings(a: AutoscalingSettings, stage: str) -> Any:
        kw = {**a.policy_kwargs(), "stage": stage, "capacity_per_s": capacities[stage]}
        return rule_from_kwargs(kw).scaling(a.min_replicas, a.max_replicas)

    llm_s = settings(llm, LLM) if llm is not None else None
    enc_s = settings(enc, ENCODER) if enc is not None and ENCODER in capacities else None
    app = AppScalingSettings(enc_s or llm_s, llm_s or enc_s, g.architecture)  # type: ignore[arg-type]
    sized = initial_replicas(history, app, tokens_per_image)
    log.info("initial stage replicas from history: %s", sized)
    return {stage: sized[stage] for stage in out}


def stage_options(g: GenerationConfig, capacities: Mapping[str, float],
                  initials: Mapping[str, int]) -> dict[str, dict[str, Any]]:
    """`.options()` replica keys of the encoder and LLM deployments."""
    out: dict[str, dict[str, Any]] = {ENCODER: {"num_replicas": g.encoder.num_replicas},
                                      LLM: {"num_replicas": g.llm.num_replicas}}
    enc, llm = g.encoder.autoscaling, g.llm.autoscaling
    if enc is not None and ENCODER in capacities:
        out[ENCODER] = {"autoscaling_config": serve_autoscaling(
            enc, {"stage": ENCODER, "capacity_per_s": capacities[ENCODER]}, initials[ENCODER])}
    if llm is not None:
        out[LLM] = {"autoscaling_config": serve_autoscaling(
            llm, {"stage": LLM, "capacity_per_s": capacities[LLM],
                  "architecture": g.architecture}, initials[LLM])}
    return out


def classifier_capacity(a: ClassifierAutoscaling, c: ClassifierConfig,
                        profiles: Mapping[str, Profile]) -> float:
    """Items/s one replica carries: the worst task's, at the variant `a.variant` names."""
    if a.capacity_per_s is not None:
        return a.capacity_per_s
    if not profiles:
        raise ValueError(f"classifier {c.name}: autoscaling needs capacity_per_s or profiles")
    caps = []
    for profile in profiles.values():
        model = LatencyModel.from_profile(profile, c.percentile, c.max_batch_size)
        i = model.most_accurate() if a.variant == "most_accurate" else model.fastest()
        caps.append(items_capacity_per_s(partial(model.latency, i), c.max_batch_size,
                                         c.default_slo_ms / 1000.0, a.latency_share))
    return min(caps)


def classifier_options(c: ClassifierConfig, profiles: Mapping[str, Profile]) -> dict[str, Any]:
    a = c.autoscaling
    if a is None:
        return {"num_replicas": c.num_replicas}
    kwargs = {"stage": "classifier", "unit": "items/s",
              "capacity_per_s": classifier_capacity(a, c, profiles)}
    return {"autoscaling_config": serve_autoscaling(a, kwargs, own_initial(c.num_replicas, a))}
