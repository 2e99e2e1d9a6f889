"""OTAS and MOSEL as replica schedulers."""

from __future__ import annotations

import random

from policies.profile import Profile
from policies.schedulers.base import DropReason, PendingItem
from policies.schedulers.plan_types import (
    MoselPlan,
    OtasPlan,
)
from policies.schedulers.plans import (
    build_mosel_plan,
    build_otas_plan,
)
from policies.schedulers.registry import make_scheduler
from tests.helpers.scheduler_harness import (
    EPS,
    Trace,
    all_accounted,
    drive,
    fusion_profile,
    json_round_trip,
    poisson,
    token_profile,
)


def test_otas_runs_or_evicts_everything_one_task_per_batch() -> None:
    profile = token_profile()
    plan = build_otas_plan(profile)
    assert isinstance(json_round_trip(plan), OtasPlan) and plan.to_json()["rate_table"][-1] == {
        "max_qps": None, "gamma": plan.rate_table.rows[-1].gamma}  # infinity as null
    items = poisson(900.0, 1.0, 0.04, seed=5, tasks=("cifar10", "cifar100"))
    s = make_scheduler("otas", profile, json_round_trip(plan), {})
    trace = drive(s, profile, items, 8)
    all_accounted(trace, items)
    gammas = {profile.by_name(v).variant.gamma for _, v, _ in trace.batches}
    assert len(gammas) >= 2  # adapts its tokens under the fluctuating queue
    for _start, v, ids in trace.batches:  # the variant answers the batch's task
        task = {next(p for p in items if p.item_id == x).task for x in ids}
        assert task == {profile.by_name(v).variant.model}
    assert trace.dropped  # overloaded: eviction happens
    assert all(r in (DropReason.SHED, DropReason.DEADLINE_EXCEEDED)
               for r in trace.dropped.values())
    assert {v for _, v, _ in trace.batches} <= {v.variant.name for v in profile.variants}


def test_fixed_gamma_uses_one_gamma() -> None:
    profile = token_profile()
    items = poisson(300.0, 0.5, 0.05, seed=6, tasks=("cifar10", "cifar100"))
    s = make_scheduler("fixed_gamma", profile, None, {"gamma": 4})
    trace = drive(s, profile, items, 8)
    all_accounted(trace, items)
    assert {profile.by_name(v).variant.gamma for _, v, _ in trace.batches} == {4}


def test_otas_light_load_no_drops() -> None:
    profile = token_profile()
    items = poisson(50.0, 1.0, 0.2, seed=7, tasks=("cifar10",))
    trace = drive(make_scheduler("otas", profile, None, {}), profile, items, 8)
    all_accounted(trace, items)
    assert not trace.dropped


# --- MOSEL -------------------------------------------------------------------------------


def mosel_jobs(num_jobs: int, gap_s: float, slo_s: float, floor: float,
               seed: int = 0) -> list[PendingItem]:
    rng = random.Random(seed)
    out: list[PendingItem] = []
    for j in range(num_jobs):
        size = rng.randint(1, 6)
        t = j * gap_s
        out.extend(PendingItem(f"j{j}-{k}", t, t + slo_s, "av", min_accuracy=floor,
                               job_id=f"j{j}", job_size=size) for k in range(size))
    return out


def check_jobs(trace: Trace, items: list[PendingItem], profile: Profile) -> None:
    """A job is all run or all dropped; a run job meets its accuracy floor."""
    jobs: dict[str, list[PendingItem]] = {}
    for p in items:
        jobs.setdefault(str(p.job_id), []).append(p)
    variant_of = {x: v for _, v, ids in trace.batches for x in ids}
    for members in jobs.values():
        dropped = [p.item_id in trace.dropped for p in members]
        assert all(dropped) or not any(dropped)
        if not any(dropped):
            acc = sum(profile.by_name(variant_of[p.item_id]).accuracy for p in members)
            assert acc / len(members) >= (members[0].min_accuracy or 0.0) - 1e-9


def test_mosel_plan_round_trip_and_light_load() -> None:
    profile = fusion_profile()
    plan = build_mosel_plan(profile, max_job_size=8, num_levels=6)
    again = json_round_trip(plan)
    assert isinstance(again, MoselPlan) and plan.to_json()["kind"] == "mosel_matrix"
    items = mosel_jobs(20, 0.4, 0.5, 0.75)
    s = make_scheduler("mosel", profile, again, {})
    trace = drive(s, profile, items, 8, percentile="mean")
    all_accounted(trace, items)
    check_jobs(trace, items, profile)
    assert not trace.dropped
    assert all(trace.finish[p.item_id] <= p.deadline_s + EPS for p in items)
    assert "audio+video" in {v for _, v, _ in trace.batches}  # accurate when there is time


def test_mosel_overload_degrades_then_sheds() -> None:
    profile = fusion_profile()
    plan = build_mosel_plan(profile, max_job_size=8, num_levels=6)
    items = mosel_jobs(80, 0.006, 0.15, 0.74, seed=1)
    s = make_scheduler("mosel", profile, plan, {})
    trace = drive(s, profile, items, 8, percentile="mean")
    all_accounted(trace, items)
    check_jobs(trace, items, profile)
    assert "audio" in {v for _, v, _ in trace.batches}  # degraded to the fast modality
    assert DropReason.SHED in set(trace.dropped.values())
    by_id = {p.item_id: p for p in items}
    late = sum(trace.finish[x] > by_id[x].deadline_s + EPS for x in trace.finish)
    assert late <= 0.05 * len(trace.finish)
    base = make_scheduler("all_modalities", profile, plan, {})
    btrace = drive(base, profile, items, 8, percentile="mean")
    all_accounted(btrace, items)
    assert not btrace.dropped and {v for _, v, _ in btrace.batches} == {"audio+video"}
    on_time = sum(trace.finish[x] <= by_id[x].deadline_s + EPS for x in trace.finish)
    b_on_time = sum(btrace.finish[x] <= by_id[x].deadline_s + EPS for x in btrace.finish)
    assert on_time > b_on_time


def test_mosel_respects_a_smaller_replica_batch_cap() -> None:
    profile = fusion_profile()
    plan = build_mosel_plan(profile, max_job_size=8, num_levels=6)
    items = mosel_jobs(30, 0.05, 0.6, 0.78, seed=2)
    s = make_scheduler("mosel", profile, plan, {"max_batch_size": 2})
    trace = drive(s, profile, items, 2, percentile="mean")
    all_accounted(trace, items)
    check_jobs(trace, items, profile)


