"""The Serve autoscaling hooks (deployments/autoscaling/) on Serve's own `AutoscalingContext`,
through Serve's own plumbing: the policy class resolved from an `AutoscalingPolicy` (class +
policy_kwargs, as the controller does) and wrapped as the controller wraps it (delays, bounds,
its internal state keys merged with ours)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from ray.serve._private.autoscaling_state import _resolve_policy_callable
from ray.serve._private.common import DeploymentID, ReplicaID
from ray.serve.autoscaling_policy import (
    _apply_app_level_autoscaling_config,
    _apply_autoscaling_config,
)
from ray.serve.config import AutoscalingConfig, AutoscalingContext, AutoscalingPolicy

from deployments.autoscaling.decisions import STATE_KEY, rule_from_kwargs
from deployments.autoscaling.serve_hooks import CoordinatedPolicy, StagePolicy
from policies.autoscaling import ScalingState

APP = "adaptserve"
HOOKS = "deployments.autoscaling.serve_hooks"
ENC_KW = {"stage": "encoder", "capacity_per_s": 100.0, "target_utilization": 1.0,
          "scale_down_delay_s": 10.0, "startup_s": 2.0, "publish": False}
LLM_KW = {"stage": "llm", "capacity_per_s": 1000.0, "target_utilization": 1.0,
          "scale_down_delay_s": 10.0, "startup_s": 30.0, "architecture": "decoder_only",
          "publish": False}


def config(kwargs: dict[str, Any], lo: int = 1, hi: int = 4,
           policy: str = "StagePolicy") -> AutoscalingConfig:
    return AutoscalingConfig(
        min_replicas=lo, max_replicas=hi, upscale_delay_s=0.0, downscale_delay_s=0.0,
        policy=AutoscalingPolicy(policy_function=f"{HOOKS}:{policy}", policy_kwargs=kwargs))


def ctx(name: str, cfg: AutoscalingConfig, metrics: dict[str, list[float]], target: int,
        now: float, state: dict[str, Any] | None = None, running: int | None = None
        ) -> AutoscalingContext:
    """A context as Serve's controller builds one: `metrics` name -> per running replica."""
    dep = DeploymentID(name=name, app_name=APP)
    n = target if running is None else running
    replicas = [ReplicaID(f"{name}-{i}", dep) for i in range(n)]
    agg = {m: dict(zip(replicas, values, strict=False)) for m, values in metrics.items()}
    return AutoscalingContext(
        deployment_id=dep, deployment_name=name, app_name=APP, current_num_replicas=n,
        target_num_replicas=target, running_replicas=replicas, total_num_requests=1.0,
        total_queued_requests=0.0, aggregated_metrics=agg, raw_metrics={},
        capacity_adjusted_min_replicas=cfg.min_replicas,
        capacity_adjusted_max_replicas=cfg.max_replicas, policy_state=dict(state or {}),
        last_scale_up_time=None, last_scale_down_time=None, current_time=now, config=cfg)


def served(cfg: AutoscalingConfig) -> Any:
    """The policy as Serve's controller calls it (instantiated once, wrapped)."""
    return _apply_autoscaling_config(_resolve_policy_callable(cfg.policy))


def test_serve_instantiates_the_class_once_with_its_kwargs() -> None:
    policy = _resolve_policy_callable(config(ENC_KW).policy)
    assert isinstance(policy, StagePolicy)
    assert policy.rule.capacity_per_s == 100.0 and policy.rule.metrics == ("image_tokens_per_s",)


def test_encoders_scale_up_at_once_and_down_after_the_delay() -> None:
    cfg = config(ENC_KW)
    policy = served(cfg)
    n, state = policy(ctx("ImageEncoder", cfg, {"image_tokens_per_s": [250.0]}, 1, 100.0))
    assert n == 3  # ceil(250 / 100)
    assert isinstance(state[STATE_KEY], ScalingState)
    assert "decision_counter" in " ".join(state)  # Serve's own keys merged back in
    n, state = policy(ctx("ImageEncoder", cfg, {"image_tokens_per_s": [10.0] * 3}, 3, 101.0,
                          state))
    assert n == 3  # low, but just scaled up
    n, state = policy(ctx("ImageEncoder", cfg, {"image_tokens_per_s": [10.0] * 3}, 3, 111.5,
                          state))
    assert n == 3  # low for 10.5 s, but within startup_s + scale_down_delay_s of the scale-up
    n, state = policy(ctx("ImageEncoder", cfg, {"image_tokens_per_s": [10.0] * 3}, 3, 112.5,
                          state))
    assert n == 1


def test_the_load_is_the_sum_of_the_running_replicas_reports() -> None:
    cfg = config(ENC_KW, hi=8)
    n, _ = served(cfg)(ctx("ImageEncoder", cfg,
                           {"image_tokens_per_s": [120.0, 130.0, math.nan, -5.0],
                            "slo_attainment": [1.0] * 4}, 1, 0.0, running=4))
    assert n == 3  # 250 tokens/s; NaN and negative reports count as nothing


def test_the_bounds_hold() -> None:
    cfg = config(ENC_KW, lo=2, hi=4)
    policy = served(cfg)
    assert policy(ctx("ImageEncoder", cfg, {"image_tokens_per_s": [5000.0]}, 2, 0.0))[0] == 4
    assert policy(ctx("ImageEncoder", cfg, {}, 2, 1.0))[0] == 2  # no reports: the minimum


def test_slo_evidence_adds_a_replica_beyond_the_arithmetic() -> None:
    cfg = config({**ENC_KW, "slo_attainment_floor": 0.99})
    n, _ = served(cfg)(ctx("ImageEncoder", cfg, {"image_tokens_per_s": [50.0, 50.0],
                                                 "slo_attainment": [1.0, 0.9]}, 2, 0.0))
    assert n == 3


@pytest.mark.parametrize(("arch", "expected"), [("decoder_only", 3), ("cross_attention", 1)])
def test_llm_counts_image_tokens_only_for_decoder_only(arch: str, expected: int) -> None:
    cfg = config({**LLM_KW, "architecture": arch})
    n, _ = served(cfg)(ctx("LLMBackend", cfg, {"text_tokens_per_s": [500.0],
                                               "image_tokens_per_s": [2000.0]}, 1, 0.0))
    assert n == expected


def test_classifiers_scale_on_items_per_second() -> None:
    cfg = config({"stage": "classifier", "capacity_per_s": 40.0, "target_utilization": 0.5,
                  "publish": False})
    n, _ = served(cfg)(ctx("Classifier_family", cfg, {"items_per_s": [30.0, 25.0],
                                                      "load_qps": [99.0, 99.0]}, 2, 0.0))
    assert n == 3  # ceil(55 / 20)


def test_bad_kwargs_are_refused_naming_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="valid"):
        rule_from_kwargs({"stage": "encoder", "capacity_per_s": 1.0, "capacity": 2.0})
    with pytest.raises(ValueError, match="valid"):
        rule_from_kwargs({"stage": "decoder", "capacity_per_s": 1.0})
    with pytest.raises(ValueError, match="capacity_per_s"):
        rule_from_kwargs({"stage": "llm"})
    with pytest.raises(ValueError):
        rule_from_kwargs({"stage": "llm", "capacity_per_s": 1.0, "target_utilization": 2.0})


def app_policy() -> Any:
    policy = AutoscalingPolicy(policy_function=f"{HOOKS}:CoordinatedPolicy",
                               policy_kwargs={"publish": False})
    resolved = _resolve_policy_callable(policy)
    assert isinstance(resolved, CoordinatedPolicy)
    return _apply_app_level_autoscaling_config(resolved)


def stages(enc_tokens: float, text: float, llm_images: float, enc_target: int, now: float,
           states: dict[Any, Any] | None = None, enc_running: int | None = None
           ) -> dict[Any, AutoscalingContext]:
    enc_cfg, llm_cfg = config(ENC_KW, hi=6), config(LLM_KW, hi=3)
    states = states or {}
    e = ctx("ImageEncoder", enc_cfg, {"image_tokens_per_s": [enc_tokens]}, enc_target, now,
            states.get(DeploymentID("ImageEncoder", APP)), running=enc_running or 1)
    llm = ctx("LLMBackend", llm_cfg, {"text_tokens_per_s": [text],
                                      "image_tokens_per_s": [llm_images]}, 1, now,
              states.get(DeploymentID("LLMBackend", APP)))
    return {e.deployment_id: e, llm.deployment_id: llm}


def test_an_image_only_burst_scales_the_encoders_not_the_llm() -> None:
    policy = app_policy()
    enc, llm = DeploymentID("ImageEncoder", APP), DeploymentID("LLMBackend", APP)
    # a burst: 500 image tokens/s at the encoders; the LLM sees text flat and the images the
    # one running encoder delivers (100/s), not the 2000/s arriving at it in the same window
    out, states = policy(stages(500.0, 500.0, 2000.0, 1, 0.0))
    assert out == {enc: 5, llm: 1}
    # the encoders still starting: the LLM's image tokens stay capped by the running ones
    out, states = policy(stages(500.0, 500.0, 2000.0, 5, 1.0, states, enc_running=1))
    assert out[llm] == 1
    assert set(states[enc]) >= {STATE_KEY} and set(states[llm]) >= {STATE_KEY}


def test_when_the_encoders_deliver_the_decoder_only_llm_counts_the_images() -> None:
    policy = app_policy()
    llm = DeploymentID("LLMBackend", APP)
    out, _ = policy(stages(500.0, 500.0, 2000.0, 5, 0.0, enc_running=5))
    assert out[llm] == 1  # 500 text + min(2000, 5 x 100) images = 1000: one replica
    out, _ = policy(stages(500.0, 900.0, 2000.0, 5, 0.0, enc_running=5))
    assert out[llm] == 2


def test_the_app_policy_sizes_other_deployments_alone_and_leaves_foreign_ones() -> None:
    policy = app_policy()
    contexts = stages(50.0, 10.0, 0.0, 1, 0.0)
    cls_cfg = config({"stage": "classifier", "capacity_per_s": 10.0, "target_utilization": 1.0})
    c = ctx("Classifier_vit", cls_cfg, {"items_per_s": [35.0]}, 1, 0.0)
    other_cfg = AutoscalingConfig(min_replicas=1, max_replicas=3)  # Serve's default policy
    o = ctx("Other", other_cfg, {}, 2, 0.0)
    out, states = policy({**contexts, c.deployment_id: c, o.deployment_id: o})
    assert out[c.deployment_id] == 4
    assert o.deployment_id not in out and STATE_KEY not in states[o.deployment_id]


def test_replicas_report_their_arrival_rates() -> None:
    from deployments.autoscaling.reporting import ArrivalRates

    now = [0.0]
    rates = ArrivalRates(("text_tokens_per_s", "image_tokens_per_s"), 2.0, clock=lambda: now[0])
    now[0] = 1.0
    rates.add("text_tokens_per_s", 30)
    rates.add("image_tokens_per_s", 96)
    assert rates.rates() == {"text_tokens_per_s": 30.0, "image_tokens_per_s": 96.0}


def test_publishing_outside_ray_does_nothing_and_never_starts_ray() -> None:
    """In a fresh interpreter: other tests of the session may have started Ray in this one."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import time, ray\n"
            "from deployments.autoscaling.ledger import Publisher\n"
            "p = Publisher('app', interval_s=0.01)\n"
            "p.offer([{'deployment': 'ImageEncoder', 'target': 2, 'previous_target': 1}])\n"
            "time.sleep(0.05)\n"
            "print('RAY_INITIALIZED', ray.is_initialized())\n")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "RAY_INITIALIZED False" in out.stdout, out.stdout[-2000:]
