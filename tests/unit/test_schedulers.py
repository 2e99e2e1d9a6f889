"""Replica schedulers driven by a tiny pure loop: virtual clock, service time from the profile."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from policies.profile import LatencyModel, LatencyPoint, Profile, VariantProfile
from policies.schedulers.base import DropReason, PendingItem, Scheduler
from policies.schedulers.common import MissingPlan
from policies.schedulers.params import FixedParams, RamsisParams
from policies.schedulers.plan_types import (
    LoadGranularPlan,
    MoselPlan,
    OtasPlan,
    RamsisPolicySet,
    RamsisTable,
    plan_from_json,
)
from policies.schedulers.plans import (
    RamsisPlanSettings,
    build_jellyfish_plan,
    build_mosel_plan,
    build_otas_plan,
    build_ramsis_plan,
)
from policies.schedulers.registry import make_scheduler, scheduler_names
from policies.types import Variant

EPS = 1e-9


def _points(fixed_ms: float, per_ms: float, sizes: tuple[int, ...] = (1, 2, 4, 8)
            ) -> tuple[LatencyPoint, ...]:
    return tuple(LatencyPoint(b, fixed_ms + per_ms * b, fixed_ms + per_ms * b,
                              fixed_ms + per_ms * b, fixed_ms + per_ms * b) for b in sizes)


def image_profile() -> Profile:
    spec = [("small", 0.70, 4.0, 1.0), ("mid", 0.80, 8.0, 2.5), ("big", 0.90, 16.0, 5.0)]
    return Profile("img", "test", tuple(VariantProfile(Variant(n, model=n), a, _points(f, p))
                                        for n, a, f, p in spec))


def token_profile() -> Profile:
    out = []
    for task, drop in (("cifar10", 0.0), ("cifar100", 0.1)):
        for gamma, acc, f, p in ((-10, 0.80, 3.0, 1.0), (0, 0.90, 5.0, 2.0), (4, 0.93, 8.0, 3.0)):
            out.append(VariantProfile(Variant(f"vit-{task}-g{gamma}", model=task, gamma=gamma),
                                      acc - drop, _points(f, p)))
    return Profile("vit", "test", tuple(out))


def fusion_profile() -> Profile:
    spec = [(("audio",), 0.77, 2.0, 2.7), (("video",), 0.72, 14.0, 27.0),
            (("audio", "video"), 0.80, 16.0, 30.0)]
    return Profile("fusion", "test", tuple(
        VariantProfile(Variant("+".join(m), model="tvlt", modalities=frozenset(m)), a,
                       _points(f, p)) for m, a, f, p in spec))


@dataclass
class Trace:
    """What the driver saw: finish time per run item, drops, and the batches."""

    finish: dict[str, float] = field(default_factory=dict)
    dropped: dict[str, DropReason] = field(default_factory=dict)
    batches: list[tuple[float, str, tuple[str, ...]]] = field(default_factory=list)
    drop_times: dict[str, float] = field(default_factory=dict)


def drive(scheduler: Scheduler, profile: Profile, arrivals: list[PendingItem],
          max_batch_size: int, percentile: str = "p95") -> Trace:
    """Single replica: whenever idle, ask; drop and run what it says; check the contract."""
    model = LatencyModel.from_profile(profile, percentile)
    todo = sorted(arrivals, key=lambda p: p.arrival_s)
    queue: dict[str, PendingItem] = {}
    trace = Trace()
    now, i = 0.0, 0
    for _ in range(100_000):
        while i < len(todo) and todo[i].arrival_s <= now + EPS:
            queue[todo[i].item_id] = todo[i]
            i += 1
        if not queue:
            if i == len(todo):
                return trace
            now = todo[i].arrival_s
            continue
        pending = tuple(sorted(queue.values(), key=lambda p: (p.deadline_s, p.item_id)))
        load = sum(1 for p in arrivals if now - 1.0 < p.arrival_s <= now)
        decision = scheduler.decide(pending, now, float(load))
        seen: set[str] = set()
        for d in decision.drops:
            assert d.item_id in queue and d.item_id not in seen
            seen.add(d.item_id)
            trace.dropped[d.item_id] = d.reason
            trace.drop_times[d.item_id] = now
            del queue[d.item_id]
        if decision.run is not None:
            ids = decision.run.item_ids
            assert ids, "empty batch"
            assert len(set(ids)) == len(ids) and all(x in queue for x in ids)
            assert len(ids) <= max_batch_size
            assert len({queue[x].task for x in ids}) == 1, "one task per batch"
            trace.batches.append((now, decision.run.variant.name, ids))
            now += model.latency(model.index(decision.run.variant.name), len(ids))
            for x in ids:
                trace.finish[x] = now
                del queue[x]
        elif not decision.drops:
            nxt = todo[i].arrival_s if i < len(todo) else None
            assert decision.wait_s is not None or nxt is not None, "stuck: nothing will wake it"
            wake = now + decision.wait_s if decision.wait_s is not None else float("inf")
            now = min(wake, nxt if nxt is not None else float("inf"))
    raise AssertionError("driver did not terminate")


def poisson(qps: float, duration_s: float, slo_s: float, seed: int = 0,
            tasks: tuple[str, ...] = ("t",)) -> list[PendingItem]:
    rng = random.Random(seed)
    out: list[PendingItem] = []
    t, k = 0.0, 0
    while True:
        t += rng.expovariate(qps)
        if t > duration_s:
            return out
        out.append(PendingItem(f"q{k}", t, t + slo_s, tasks[k % len(tasks)],
                               utility=rng.choice([0.2, 0.5, 1.0])))
        k += 1


def all_accounted(trace: Trace, items: list[PendingItem]) -> None:
    ids = {p.item_id for p in items}
    assert set(trace.finish) | set(trace.dropped) == ids
    assert not set(trace.finish) & set(trace.dropped)


# --- registry and fixed ---------------------------------------------------------------------


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


@pytest.fixture(scope="module")
def ramsis_plan() -> RamsisPolicySet:
    return build_ramsis_plan(image_profile(), RamsisPlanSettings(
        slo_s=0.1, num_workers=2, min_qps=20.0, max_qps=400.0, intervals=20))


def json_round_trip(plan: Any) -> Any:
    """The plan through a JSON file's text and back, checked equal to itself."""
    text = json.dumps(plan.to_json())
    again = plan_from_json(json.loads(text))
    assert again == plan and type(again) is type(plan)
    assert again.plan_id == plan.plan_id and json.loads(text)["plan_id"] == plan.plan_id
    return again


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
