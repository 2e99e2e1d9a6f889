"""RAMSIS and its load-granular baselines as replica schedulers."""

from __future__ import annotations

from typing import Any

import pytest

from policies.profile import LatencyModel
from policies.schedulers.base import PendingItem
from policies.schedulers.common import MissingPlan
from policies.schedulers.plan_types import (
    LoadGranularPlan,
    RamsisPolicySet,
    RamsisTable,
)
from policies.schedulers.plans import (
    build_jellyfish_plan,
    build_otas_plan,
)
from policies.schedulers.registry import make_scheduler
from tests.helpers.scheduler_harness import (
    EPS,
    all_accounted,
    drive,
    image_profile,
    json_round_trip,
    poisson,
    token_profile,
)


def test_ramsis_plan_json_round_trip(ramsis_plan: RamsisPolicySet) -> None:
    again = json_round_trip(ramsis_plan)
    data = ramsis_plan.to_json()
    assert data["kind"] == "ramsis_policy_set" and data["format_version"] == 1
    assert [t.to_dict() for t in again.tables] == data["tables"]
    assert json_round_trip(RamsisTable(ramsis_plan.tables[0])).table == ramsis_plan.tables[0]
    profile = image_profile()
    a = make_scheduler("ramsis", profile, ramsis_plan, {})
    b = make_scheduler("ramsis", profile, again, {})
    pending = tuple(PendingItem(str(k), 0.0, 0.05, "t") for k in range(5))
    for load in (10.0, 100.0, 300.0):
        assert a.decide(pending, 0.0, load) == b.decide(pending, 0.0, load)


def test_ramsis_faster_variant_at_higher_load_and_lower_slack(
        ramsis_plan: RamsisPolicySet) -> None:
    profile = image_profile()
    model = LatencyModel.from_profile(profile)
    s = make_scheduler("ramsis", profile, ramsis_plan, {"load_scope": "deployment"})

    def latency_of(n: int, slack: float, load: float) -> float:
        pending = tuple(PendingItem(str(k), 0.0, slack, "t") for k in range(n))
        run = s.decide(pending, 0.0, load).run
        assert run is not None
        return model.latency(model.index(run.variant.name), 1)

    assert latency_of(4, 0.1, 400.0) < latency_of(4, 0.1, 20.0)  # load up -> faster
    assert latency_of(8, 0.03, 20.0) < latency_of(8, 0.1, 20.0)  # slack down -> faster
    for n, slack in ((1, 0.1), (4, 0.1), (8, 0.05)):  # never slower as load grows
        lats = [latency_of(n, slack, q) for q in (20.0, 100.0, 200.0, 300.0, 400.0)]
        assert lats == sorted(lats, reverse=True)


def test_ramsis_replica_load_counts_every_worker(ramsis_plan: RamsisPolicySet) -> None:
    """The default load scope ("replica"): a replica's own rate times the plan's workers is
    the deployment load the tables are indexed by."""
    profile = image_profile()
    assert ramsis_plan.num_workers == 2
    per_replica = make_scheduler("ramsis", profile, ramsis_plan, {})
    whole = make_scheduler("ramsis", profile, ramsis_plan, {"load_scope": "deployment"})
    pending = tuple(PendingItem(str(k), 0.0, 0.1, "t") for k in range(4))

    def choice(s: Any, load: float) -> tuple[str, int]:
        run = s.decide(pending, 0.0, load).run
        assert run is not None
        return run.variant.name, len(run.item_ids)

    loads = (10.0, 50.0, 100.0, 150.0, 200.0)
    for q in loads:
        assert choice(per_replica, q) == choice(whole, 2 * q)
    # the check can tell: somewhere doubling the load changes the choice
    assert any(choice(whole, 2 * q) != choice(whole, q) for q in loads)


def test_ramsis_driver_and_pinned_table(ramsis_plan: RamsisPolicySet) -> None:
    profile = image_profile()
    s = make_scheduler("ramsis", profile, ramsis_plan, {})
    items = poisson(150.0, 1.0, 0.1, seed=3)
    trace = drive(s, profile, items, 8)
    all_accounted(trace, items)
    assert not trace.dropped  # RAMSIS serves late rather than drop, by default
    on_time = sum(trace.finish[p.item_id] <= p.deadline_s + EPS for p in items)
    assert on_time >= 0.95 * len(items)
    top, bottom = ramsis_plan.tables[-1], ramsis_plan.tables[0]
    pending = tuple(PendingItem(str(k), 0.0, 0.1, "t") for k in range(3))

    def chosen(table: Any) -> str:
        choice = table.lookup(3, 0.1)
        return str(table.variant_names[choice.variant_index])

    assert chosen(top) != chosen(bottom)  # the check below can tell pinned from not
    s.update_plan(json_round_trip(RamsisTable(top)))
    run = s.decide(pending, 0.0, 1.0).run  # pinned: load ignored
    assert run is not None and run.variant.name == chosen(top)
    s.update_plan(ramsis_plan)  # a set unpins: light load picks the lightest table again
    run = s.decide(pending, 0.0, 1.0).run
    assert run is not None and run.variant.name == chosen(bottom)
    with pytest.raises(ValueError, match="ramsis_policy_set"):
        s.update_plan(build_otas_plan(token_profile()))


def test_jellyfish_and_modelswitching() -> None:
    profile = image_profile()
    model = LatencyModel.from_profile(profile)
    plan = json_round_trip(build_jellyfish_plan(profile, 0.1, 2, [20.0, 200.0, 600.0]))
    assert isinstance(plan, LoadGranularPlan)
    s = make_scheduler("jellyfish", profile, plan, {"load_scope": "deployment"})
    pending = tuple(PendingItem(str(k), 0.0, 0.1, "t") for k in range(8))
    lats = []
    for load in (10.0, 200.0, 600.0):
        run = s.decide(pending, 0.0, load).run
        assert run is not None
        lats.append(model.latency(model.index(run.variant.name), 1))
    assert lats == sorted(lats, reverse=True) and lats[0] > lats[-1]
    items = poisson(150.0, 0.5, 0.1, seed=4)
    all_accounted(drive(s, profile, items, 8), items)
    ms = make_scheduler("modelswitching", profile, plan, {})
    assert ms.name == "modelswitching"
    with pytest.raises(MissingPlan, match="load_granular"):
        make_scheduler("modelswitching", profile, None, {})


# --- OTAS --------------------------------------------------------------------------------


