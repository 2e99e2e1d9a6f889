"""`autoscaling:` in the config (deployments/autoscaling/config.py), what the builder makes of it
(app/autoscaling.py: Serve's AutoscalingConfig, capacities from profiles, initial sizes from
history), the shipped VLM config as Serve reads it, and the decisions as /v1/status and
/metrics show them (ledger.py, view.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError
from ray.serve._private.autoscaling_state import _resolve_policy_callable
from ray.serve.config import AutoscalingPolicy
from ray.serve.schema import ServeDeploySchema

from app import autoscaling as a
from deployments.autoscaling.config import AutoscalingSettings, EncoderAutoscaling
from deployments.autoscaling.ledger import DecisionLog
from deployments.autoscaling.serve_hooks import CoordinatedPolicy, StagePolicy
from deployments.autoscaling.view import prometheus_text, status_json
from deployments.classifier.config import ClassifierConfig
from deployments.ingress.chat.config import GenerationConfig
from policies.autoscaling.history import history_from_json, history_to_json, items_capacity_per_s
from policies.generation.stage_profile import EncoderProfile, LLMProfile, StageProfiles
from tests.helpers.scheduler_harness import image_profile

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("bad", [
    {"min_replicas": 3, "max_replicas": 2},
    {"initial_replicas": 9},
    {"look_back_period_s": 1.0, "metrics_interval_s": 1.0},
    {"target_utilization": 0.0},
    {"scale_down_delay": 3},  # a typo is an error
])
def test_bad_autoscaling_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        AutoscalingSettings.model_validate(bad)


def gen(**stages: Any) -> GenerationConfig:
    return GenerationConfig.model_validate(stages)


def test_without_autoscaling_the_stages_keep_num_replicas() -> None:
    g = gen(encoder={"num_replicas": 2}, llm={"num_replicas": 1})
    assert a.stage_options(g, {}, {}) == {"encoder": {"num_replicas": 2},
                                          "llm": {"num_replicas": 1}}


def test_autoscaled_stages_get_serve_configs_with_our_policy() -> None:
    g = gen(architecture="cross_attention",
            encoder={"num_replicas": 2, "autoscaling": {"capacity_per_s": 300, "max_replicas": 5,
                                                        "scale_down_delay_s": 7}},
            llm={"autoscaling": {"capacity_per_s": 900, "min_replicas": 1, "max_replicas": 2}})
    caps = a.stage_capacities(g, None)
    assert caps == {"encoder": 300.0, "llm": 900.0}
    opts = a.stage_options(g, caps, a.stage_initials(g, caps, None, 16))
    enc = opts["encoder"]["autoscaling_config"]
    assert (enc.min_replicas, enc.max_replicas, enc.initial_replicas) == (1, 5, 2)
    assert (enc.upscale_delay_s, enc.downscale_delay_s) == (0.0, 0.0)  # ours is the hysteresis
    assert enc.policy.policy_kwargs["scale_down_delay_s"] == 7
    policy = _resolve_policy_callable(enc.policy)
    assert isinstance(policy, StagePolicy) and policy.rule.capacity_per_s == 300.0
    llm = _resolve_policy_callable(opts["llm"]["autoscaling_config"].policy)
    assert llm.rule.metrics == ("text_tokens_per_s",)  # cross-attention: text only


def profiles() -> StageProfiles:
    return StageProfiles("vlm", "test", EncoderProfile(16, {1: 10.0, 8: 40.0}),
                         LLMProfile("decoder_only", {16: 5.0, 128: 20.0}, {1: 5.0, 8: 10.0}), {})


def test_capacity_from_the_stage_profile_unless_set() -> None:
    g = gen(limits={"default_ttft_slo_ms": 200}, encoder={"autoscaling": {}},
            llm={"autoscaling": {"capacity_per_s": 50}})
    assert a.needs_stage_profile(g)
    caps = a.stage_capacities(g, profiles())
    assert caps["encoder"] == pytest.approx(8 * 16 * 1000 / 40.0)  # batch 8 fits 100 ms
    assert caps["llm"] == 50
    with pytest.raises(ValueError, match="profile --stages"):
        a.stage_capacities(g, None)


def test_initial_sizes_from_history(tmp_path: Path) -> None:
    from policies.autoscaling import History

    h = History(image_qps=[20.0, 40.0, 30.0], encode_latency_s=[0.1], request_qps=[10.0],
                images_per_request=[3.0], text_tokens_per_request=[20.0])
    path = tmp_path / "vlm.history.json"
    path.write_text(json.dumps(history_to_json(h, 5.0, "test")))
    assert history_from_json(json.loads(path.read_text())) == History(
        (20.0, 40.0, 30.0), (0.1,), (10.0,), (3.0,), (20.0,))
    g = gen(encoder={"autoscaling": {"capacity_per_s": 100, "max_replicas": 8}},
            llm={"autoscaling": {"capacity_per_s": 200, "max_replicas": 4}}, history=str(path))
    caps = a.stage_capacities(g, None)
    # encoders: median 30 images/s x 0.1 s = 3; LLM: 10 req/s x (20 + 3 x 16) tokens = 680/s
    # over 200 x 0.8 (target utilization) per replica = 5, bounded by 4
    assert a.stage_initials(g, caps, a.load_history(g.history, ROOT), 16) == {
        "encoder": 3, "llm": 4}
    assert a.load_history(str(tmp_path / "none.json"), ROOT) is None
    assert a.stage_initials(g, caps, None, 16) == {"encoder": 1, "llm": 1}


def test_a_bad_history_file_is_refused() -> None:
    with pytest.raises(ValueError, match="format_version"):
        history_from_json({"image_qps": [1]})
    with pytest.raises(ValueError, match="valid"):
        history_from_json({"format_version": 1, "image_qps": [1], "qps": [2]})


def test_classifier_capacity_is_its_profile_at_the_largest_batch_within_the_slo() -> None:
    c = ClassifierConfig.model_validate({"name": "img", "policy": "most_accurate",
                                         "default_slo_ms": 200, "max_batch_size": 8,
                                         "percentile": "p50", "autoscaling": {}})
    assert c.autoscaling is not None
    # the most accurate variant: 16 + 5 b ms, batch 8 = 56 ms fits half the SLO
    cap = a.classifier_capacity(c.autoscaling, c, {"t": image_profile()})
    assert cap == pytest.approx(8 / 0.056)
    opts = a.classifier_options(c, {"t": image_profile()})
    assert opts["autoscaling_config"].policy.policy_kwargs["stage"] == "classifier"
    fixed = ClassifierConfig.model_validate({"name": "img", "num_replicas": 2})
    assert a.classifier_options(fixed, {}) == {"num_replicas": 2}
    assert items_capacity_per_s(lambda b: 0.5, 4, 0.1) == 2.0  # nothing fits: batch 1


def test_the_shipped_vlm_config_is_what_serve_accepts() -> None:
    doc = yaml.safe_load((ROOT / "serve_config.vlm.yaml").read_text())
    schema = ServeDeploySchema.model_validate(doc)
    app = schema.applications[0]
    assert app.autoscaling_policy is not None
    policy = _resolve_policy_callable(AutoscalingPolicy(**app.autoscaling_policy))
    assert isinstance(policy, CoordinatedPolicy)
    g = GenerationConfig.model_validate(app.args["generation"])
    assert isinstance(g.encoder.autoscaling, EncoderAutoscaling) and g.llm.autoscaling


def record(name: str, target: int, previous: int, reason: str) -> dict[str, Any]:
    return {"deployment": name, "application": "app", "stage": "encoder", "scope": "deployment",
            "unit": "tokens/s", "load_per_s": 250.0, "forecast_per_s": 260.0,
            "capacity_per_s": 100.0, "desired": target, "target": target,
            "previous_target": previous, "running": previous, "reason": reason, "time_s": 1.0}


def test_decisions_show_in_status_and_prometheus() -> None:
    log = DecisionLog()
    log.record([record("ImageEncoder", 3, 1, "up")])
    log.record([record("ImageEncoder", 3, 3, "steady")])
    log.record([record("ImageEncoder", 3, 3, "steady")])
    snap = log.snapshot()
    status = status_json(snap)
    assert status is not None and status["deployments"]["ImageEncoder"]["target"] == 3
    assert [r["reason"] for r in status["recent_changes"]] == ["up", "steady"]
    assert status["scale_events"] == {"ImageEncoder": {"up": 1, "down": 0}}
    text = prometheus_text(snap)
    assert ('adaptserve_autoscaling_target_replicas{application="app",deployment="ImageEncoder",'
            'stage="encoder"} 3.0') in text
    assert 'adaptserve_autoscaling_scale_events_total{deployment="ImageEncoder",direction="up"} ' \
           '1.0' in text
    assert 'reason="steady"' in text
    assert status_json(None) is None and prometheus_text(None) == ""


def test_images_fan_out_to_as_many_encoders_as_there_can_be() -> None:
    fixed = GenerationConfig.model_validate({"encoder": {"num_replicas": 2}})
    assert fixed.encoder.fan_out == 2
    scaled = GenerationConfig.model_validate(
        {"encoder": {"num_replicas": 1, "autoscaling": {"min_replicas": 1, "max_replicas": 4,
                                                        "capacity_per_s": 100.0}}})
    assert scaled.encoder.fan_out == 4
