"""AppConfig validation, the policy controller's aggregation and plan selection, HTTP errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import AppConfig
from app.controller.controller import PolicyController
from deployments.ingress.errors import from_validation
from deployments.ingress.schemas import ClassifyRequest
from deployments.wire import ReplicaReport


def config(tmp: Path, **classifier) -> AppConfig:
    return AppConfig.model_validate({
        "paths": {"plans_dir": str(tmp)},
        "controller": {"interval_s": 0.5, "stale_after_s": 2.0},
        "classifiers": [{"name": "fam", **classifier}]})


def test_config_rejects_unknown_keys_and_duplicates(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="extra"):
        AppConfig.model_validate({"classifiers": [{"name": "a", "polcy": "x"}]})
    with pytest.raises(ValidationError, match="unique"):
        AppConfig.model_validate({"classifiers": [{"name": "a"}, {"name": "a"}]})
    with pytest.raises(ValidationError):
        AppConfig.model_validate({"classifiers": []})
    cfg = config(tmp_path, policy="ramsis", max_batch_size=4)
    assert cfg.classifiers[0].scheduler_params()["max_batch_size"] == 4


def report(t: float, replica: str = "r1", load: float = 10.0, **counters: float) -> ReplicaReport:
    return ReplicaReport("fam", replica, t, load, 3, counters=counters,
                         variant_counts={"v": int(counters.get("ok", 0))},
                         plan_versions={"task": "old"})


def test_controller_sums_fresh_replicas_and_counters(tmp_path: Path) -> None:
    now = [100.0]
    ctl = PolicyController(config(tmp_path), clock=lambda: now[0])
    ctl.report(report(100.0, "r1", 10.0, ok=4, deadline_met=3, late=1, accuracy_sum=3.6))
    ctl.report(report(100.0, "r2", 5.0, ok=2, deadline_met=2, shed=2, accuracy_sum=1.6))
    s = ctl.status()["deployments"]["fam"]
    assert s["load_qps"] == 15.0 and len(s["replicas"]) == 2
    assert s["answered"] == 8 and s["slo_attainment"] == pytest.approx(5 / 8)
    assert s["mean_expected_accuracy"] == pytest.approx(5.2 / 6, abs=1e-3)
    now[0] = 103.0  # both stale now
    assert ctl.load_qps("fam") == 0.0
    text = ctl.metrics_text()
    assert 'adaptserve_items_total{deployment="fam",outcome="shed"} 2.0' in text
    assert "adaptserve_slo_attainment" in text


def test_controller_pushes_changed_plans(tmp_path: Path) -> None:
    plan = {"kind": "mosel_matrix", "plan_id": "abc", "format_version": 1}
    (tmp_path / "fam.task.mosel.json").write_text(json.dumps(plan))
    ctl = PolicyController(config(tmp_path, policy="mosel"))
    updates = ctl.report(report(ctl.clock()))
    assert [(u.task, u.version) for u in updates] == [("task", "abc")]
    rep = ReplicaReport("fam", "r1", ctl.clock(), 1.0, 0, plan_versions={"task": "abc"})
    assert ctl.report(rep) == []


def test_validation_errors_are_reformatted() -> None:
    with pytest.raises(ValidationError) as info:
        ClassifyRequest.model_validate({"model": "m", "inputs": {}, "slo": {"latency_ms": -1}})
    err = from_validation(info.value)
    assert err.type == "invalid_slo" and err.status == 422
    assert "slo.latency_ms" in err.message and "greater than 0" in err.message
    with pytest.raises(ValidationError) as info:
        ClassifyRequest.model_validate({"model": 3, "inputs": [], "slo": {"latency_ms": 5}})
    err = from_validation(info.value)
    assert err.type == "invalid_request" and "inputs" in err.message and "model" in err.message
