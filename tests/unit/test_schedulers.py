"""Replica schedulers: the registry, the fixed family, plans built on demand and checked JSON."""

from __future__ import annotations

import pytest

from policies.profile import LatencyModel
from policies.schedulers.base import DropReason
from policies.schedulers.common import MissingPlan
from policies.schedulers.params import FixedParams, RamsisParams
from policies.schedulers.plan_types import (
    RamsisPolicySet,
    plan_from_json,
)
from policies.schedulers.plans import (
    build_jellyfish_plan,
)
from policies.schedulers.registry import make_scheduler, scheduler_names
from tests.helpers.scheduler_harness import (
    EPS,
    all_accounted,
    drive,
    image_profile,
    poisson,
)


def test_registry_names_and_unknown() -> None:
    assert {"fixed", "fastest", "most_accurate", "ramsis", "jellyfish", "modelswitching",
            "otas", "fixed_gamma", "mosel", "all_modalities"} <= set(scheduler_names())
    with pytest.raises(ValueError, match="valid"):
        make_scheduler("nope", image_profile(), None, {})


def test_params_are_checked_naming_the_key() -> None:
    profile = image_profile()
    with pytest.raises(ValueError, match=r"unknown params \['variantt'\].*valid: .*'variant'"):
        make_scheduler("fixed", profile, None, {"variantt": "mid"})
    with pytest.raises(ValueError, match="load_scope 'cluster'"):
        make_scheduler("ramsis", profile, None, {"load_scope": "cluster"})
    with pytest.raises(ValueError, match="scheduler .jellyfish. takes JellyfishParams, got RamsisParams"):
        make_scheduler("jellyfish", profile, None, RamsisParams())
    with pytest.raises(ValueError, match="runs no plan"):
        make_scheduler("fixed", profile, build_jellyfish_plan(profile, 0.1, 1, [10.0]))


@pytest.mark.parametrize("name,variant", [("fixed", "big"), ("fastest", "small"),
                                          ("most_accurate", "big")])
def test_fixed_family_runs_or_drops_everything(name: str, variant: str) -> None:
    profile = image_profile()
    model = LatencyModel.from_profile(profile)
    items = poisson(400.0, 1.0, 0.05, seed=1)
    trace = drive(make_scheduler(name, profile, None, {}), profile, items, 8)
    all_accounted(trace, items)
    assert {v for _, v, _ in trace.batches} == {variant}
    by_id = {p.item_id: p for p in items}
    for start, v, ids in trace.batches:  # every batch it forms meets all its deadlines
        assert start + model.latency(model.index(v), len(ids)) <= min(
            by_id[x].deadline_s for x in ids) + EPS
    for x, reason in trace.dropped.items():  # drops only when even a batch of one is late
        assert reason is DropReason.DEADLINE_EXCEEDED
        assert trace.drop_times[x] + model.latency(model.index(variant), 1) > by_id[x].deadline_s


def test_fixed_named_variant_and_one_task_batches() -> None:
    profile = image_profile()
    items = poisson(300.0, 0.5, 0.1, seed=2, tasks=("a", "b"))
    s = make_scheduler("fixed", profile, None, FixedParams(variant="mid", max_batch_size=4))
    trace = drive(s, profile, items, 4)
    all_accounted(trace, items)
    assert {v for _, v, _ in trace.batches} == {"mid"}


# --- RAMSIS and load-granular baselines ------------------------------------------------------


def test_plans_built_on_demand_from_params() -> None:
    profile = image_profile()
    params = {"slo_s": 0.1, "num_workers": 2, "min_qps": 20.0, "max_qps": 200.0,
              "max_batch_size": 4}
    for name, extra in (("jellyfish", {"num_loads": 5}), ("ramsis", {"intervals": 10})):
        s = make_scheduler(name, profile, None, {**params, **extra})
        items = poisson(100.0, 0.3, 0.1, seed=8)
        all_accounted(drive(s, profile, items, 4), items)
    with pytest.raises(MissingPlan, match="no plan"):
        make_scheduler("ramsis", profile, None, {"max_batch_size": 4})


def test_plan_json_is_validated_naming_the_field(ramsis_plan: RamsisPolicySet) -> None:
    good = build_jellyfish_plan(image_profile(), 0.1, 2, [20.0, 200.0]).to_json()
    with pytest.raises(ValueError, match="unknown plan kind 'nope'"):
        plan_from_json({**good, "kind": "nope"})
    with pytest.raises(ValueError, match="format_version"):
        plan_from_json({**good, "format_version": 2})
    with pytest.raises(ValueError, match=r"load_granular: missing field 'slo_s'"):
        plan_from_json({k: v for k, v in good.items() if k != "slo_s"})
    with pytest.raises(ValueError, match=r"unknown fields \['slo_ms'\]"):
        plan_from_json({**good, "slo_ms": 100})
    bad_choice = [{**good["choices"][0], "max_batch_size": "8"}]
    with pytest.raises(ValueError, match=r"choices\[0\]\.max_batch_size: expected an integer"):
        plan_from_json({**good, "choices": bad_choice})
    table = ramsis_plan.to_json()["tables"][0]
    broken = {**ramsis_plan.to_json(), "tables": [{**table, "full_model": 99}]}
    with pytest.raises(ValueError, match=r"tables\[0\]: variant index outside"):
        plan_from_json(broken)
