"""AppConfig validation, the policy controller's aggregation and plan selection, HTTP errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.config import AppConfig, ClassifierConfig
from app.controller.controller import PolicyController
from deployments.classifier.policy_setup import (
    TaskPlan,
    TaskPolicy,
    apply_update,
    build_policies,
    read_task_plans,
)
from deployments.ingress.classify.schemas import ClassifyRequest
from deployments.ingress.errors import from_validation
from deployments.wire import PlanUpdate, ReplicaReport
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.schedulers.params import RamsisParams
from policies.schedulers.plan_types import PlanKind
from policies.schedulers.plans import build_jellyfish_plan, build_mosel_plan
from policies.types import Variant
from profiling.paths import plan_file
from tests.helpers.controller_inputs import config, report


def test_config_rejects_unknown_keys_and_duplicates(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="extra"):
        AppConfig.model_validate({"classifiers": [{"name": "a", "polcy": "x"}]})
    with pytest.raises(ValidationError, match="unique"):
        AppConfig.model_validate({"classifiers": [{"name": "a"}, {"name": "a"}]})
    with pytest.raises(ValidationError):
        AppConfig.model_validate({"classifiers": []})
    cfg = config(tmp_path, policy="ramsis", max_batch_size=4, policy_params={"max_qps": 50})
    params = cfg.classifiers[0].scheduler_params()
    assert isinstance(params, RamsisParams)
    assert (params.max_batch_size, params.percentile, params.max_qps) == (4, "p95", 50)


def test_unknown_policy_fails_naming_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"classifiers\.0\.policy\n.*unknown policy "
                                              r"'ramsys'; valid: \[.*'ramsis'"):
        config(tmp_path, policy="ramsys")
    with pytest.raises(ValidationError, match="fallback_policy 'ramsis' must need no plan; "
                                              r"valid: \['fastest', 'fixed', 'most_accurate'\]"):
        config(tmp_path, policy="ramsis", fallback_policy="ramsis")
    with pytest.raises(ValidationError, match="unknown policy 'modelswitching'"):
        config(tmp_path, policy="modelswitching")  # its plan comes from no plan file


def test_unknown_policy_param_fails_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"policy_params\.ramsis\.drop_infeasibel\n"
                                              r"  Unexpected keyword argument"):
        config(tmp_path, policy="ramsis", policy_params={"drop_infeasibel": True})
    with pytest.raises(ValidationError, match=r"policy_params\.otas\n.*kappa must be in"):
        config(tmp_path, policy="otas", policy_params={"kappa": 2.0})
    with pytest.raises(ValidationError, match="policy_params are for 'otas', policy is 'mosel'"):
        config(tmp_path, policy="mosel", policy_params={"scheduler": "otas"})
    again = AppConfig.model_validate(config(tmp_path, policy="mosel",
                                            policy_params={"policy": "random"}).model_dump())
    assert again.classifiers[0].policy_params.scheduler == "mosel"


@dataclass
class ManualClock:
    """A clock the test moves by hand."""

    now_s: float

    def __call__(self) -> float:
        return self.now_s


def test_controller_sums_fresh_replicas_and_counters(tmp_path: Path) -> None:
    clock = ManualClock(100.0)
    ctl = PolicyController(config(tmp_path), clock=clock)
    ctl.report(report(100.0, "r1", 10.0, ok=4, deadline_met=3, late=1, accuracy_sum=3.6))
    ctl.report(report(100.0, "r2", 5.0, ok=2, deadline_met=2, shed=2, accuracy_sum=1.6))
    s = ctl.status()["deployments"]["fam"]
    assert s["load_qps"] == 15.0 and len(s["replicas"]) == 2
    assert s["answered"] == 8 and s["slo_attainment"] == pytest.approx(5 / 8)
    assert s["mean_expected_accuracy"] == pytest.approx(5.2 / 6, abs=1e-3)
    clock.now_s = 103.0  # both stale now
    assert ctl.load_qps("fam") == 0.0
    text = ctl.metrics_text()
    assert 'adaptserve_items_total{deployment="fam",outcome="shed"} 2.0' in text
    assert "adaptserve_slo_attainment" in text


def _points(base_ms: float) -> tuple[LatencyPoint, ...]:
    return tuple(LatencyPoint(b, base_ms * b, base_ms * b, base_ms * b, base_ms * b)
                 for b in (1, 2, 4, 8))


def fusion_profile() -> Profile:
    return Profile("fam.task", "test", tuple(
        VariantProfile(Variant("+".join(m), "tvlt", frozenset(m)), acc, _points(ms))
        for m, acc, ms in ((("a",), 0.7, 2.0), (("b",), 0.75, 4.0), (("a", "b"), 0.8, 6.0))))


def family_profile() -> Profile:
    return Profile("fam.task", "test", tuple(
        VariantProfile(Variant(n, n), acc, _points(ms))
        for n, acc, ms in (("small", 0.7, 2.0), ("big", 0.9, 8.0))))


def _policies(c: ClassifierConfig, path: Path) -> dict[str, TaskPolicy]:
    """The replica's policies when the builder read the plan at `path`."""
    return build_policies(c, {"task": family_profile()}, read_task_plans(c.policy, {"task": path}))


def test_controller_pushes_changed_plans(tmp_path: Path) -> None:
    plan = build_mosel_plan(fusion_profile(), max_job_size=4, num_levels=3)
    path = plan_file(tmp_path, "fam", "task", PlanKind.MOSEL)
    path.write_text(json.dumps({**plan.to_json(), "source": {"from": "a test"}}))
    ctl = PolicyController(config(tmp_path, policy="mosel"))
    updates = ctl.report(report(ctl.clock()))
    assert [(u.task, u.version, u.plan) for u in updates] == [("task", plan.plan_id, plan)]
    rep = ReplicaReport("fam", "r1", ctl.clock(), 1.0, 0, plan_versions={"task": plan.plan_id})
    assert ctl.report(rep) == []


def test_plans_handed_in_need_no_file_on_the_node(tmp_path: Path) -> None:
    """On a cluster the controller and the replicas run where the builder's plan files are not:
    the plans the builder read reach both through the application."""
    plan = build_mosel_plan(fusion_profile(), max_job_size=4, num_levels=3)
    cfg = config(tmp_path / "not-on-this-node", policy="mosel")
    handed = {"task": TaskPlan("/builder/plans/fam.task.mosel.json", plan)}
    held = build_policies(cfg.classifiers[0], {"task": fusion_profile()}, handed)["task"]
    assert not held.fallback and held.plan_version == plan.plan_id
    ctl = PolicyController(cfg, plans={"fam": handed})
    [update] = ctl.report(report(ctl.clock()))
    assert (update.task, update.version, update.plan) == ("task", plan.plan_id, plan)
    assert ctl.report(ReplicaReport("fam", "r1", ctl.clock(), 1.0, 0,
                                    plan_versions={"task": plan.plan_id})) == []
    jelly = config(tmp_path, policy="jellyfish", max_batch_size=4).classifiers[0]
    missing = build_policies(jelly, {"task": family_profile()},
                             {"task": TaskPlan("/builder/plans/x.json", None)})["task"]
    assert missing.fallback and "/builder/plans/x.json" in (missing.fallback_reason or "")


def test_missing_plan_file_runs_the_fallback_visibly(tmp_path: Path) -> None:
    cfg = config(tmp_path, policy="jellyfish", max_batch_size=4)
    c = cfg.classifiers[0]
    path = plan_file(tmp_path, "fam", "task", PlanKind.JELLYFISH)
    policies = _policies(c, path)
    held = policies["task"]
    assert held.fallback and held.scheduler.name == "most_accurate"
    assert held.fallback_reason is not None and str(path) in held.fallback_reason
    ctl = PolicyController(cfg)
    ctl.report(ReplicaReport("fam", "r1", ctl.clock(), 1.0, 0,
                             plan_versions={"task": held.plan_version},
                             fallbacks={"task": held.fallback_reason}))
    status = ctl.status()["deployments"]["fam"]
    assert status["fallback"] == {"task": held.fallback_reason}
    assert status["replicas"][0]["fallbacks"] == {"task": held.fallback_reason}
    text = ctl.metrics_text()
    assert 'adaptserve_policy_fallback{deployment="fam",task="task"} 1.0' in text
    # the plan appears (offline re-planning): the controller pushes it, the replica leaves its
    # fallback, and its next report clears the status and the gauge
    plan = build_jellyfish_plan(family_profile(), 0.2, 1, [10.0, 100.0], max_batch_size=4)
    path.write_text(json.dumps(plan.to_json()))
    [update] = ctl.report(ReplicaReport("fam", "r1", ctl.clock(), 1.0, 0,
                                        plan_versions={"task": held.plan_version},
                                        fallbacks={"task": held.fallback_reason}))
    now = apply_update(c, family_profile(), held, update)
    assert not now.fallback and now.scheduler.name == "jellyfish"
    ctl.report(ReplicaReport("fam", "r1", ctl.clock(), 1.0, 0,
                             plan_versions={"task": now.plan_version}))
    assert ctl.status()["deployments"]["fam"]["fallback"] == {}
    assert 'adaptserve_policy_fallback{deployment="fam",task="task"} 0.0' in ctl.metrics_text()


def test_a_bad_plan_file_or_plan_fails_loudly(tmp_path: Path) -> None:
    c = config(tmp_path, policy="jellyfish").classifiers[0]
    path = plan_file(tmp_path, "fam", "task", PlanKind.JELLYFISH)
    path.write_text("{not json")
    with pytest.raises(ValueError, match=f"plan file {path}"):
        _policies(c, path)
    other = Profile("fam.task", "test", (VariantProfile(Variant("tiny", "tiny"), 0.5,
                                                        _points(1.0)),))
    plan = build_jellyfish_plan(other, 0.2, 1, [10.0])
    path.write_text(json.dumps(plan.to_json()))  # valid, but for variants this profile lacks
    with pytest.raises(ValueError, match="unknown variant 'tiny'"):
        _policies(c, path)
    held = _policies(c, tmp_path / "none.json")
    wrong = PlanUpdate("task", "x", build_mosel_plan(fusion_profile(), 4, 3))
    with pytest.raises(ValueError, match="runs \\['load_granular'\\] plans, not mosel_matrix"):
        apply_update(c, family_profile(), held["task"], wrong)


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
