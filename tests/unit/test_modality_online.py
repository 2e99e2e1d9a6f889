"""Online re-planning: Figure 2, deadline safety, drops only when infeasible, the 4 policies."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sim.mosel.profiles import all_modality_index, figure2_profile, three_modality_profile
from policies.modality.api import (
    DEADLINE_EPS_S,
    ModalityQueueSnapshot,
    ModalityTables,
    QueuedJob,
    ReplanJob,
    build_matrix,
    drop_pass,
    is_feasible,
    make_policy,
    replan,
    replan_exact,
    replan_greedy,
)
from policies.profile import LatencyModel
from policies.types import SLO, Job


def _tables(profile_fn=three_modality_profile, max_job: int = 64) -> ModalityTables:  # type: ignore[no-untyped-def]
    profile = profile_fn()
    model = LatencyModel.from_profile(profile, "mean", max_job)
    return ModalityTables(build_matrix(model, max_job, 20), model, all_modality_index(profile))


FIG2 = _tables(figure2_profile, 8)
THREE = _tables()


def _figure2_snapshot() -> ModalityQueueSnapshot:
    job2 = Job(2, arrival_s=10.0, slo=SLO(140.0, 0.71), num_requests=2)
    job3 = Job(3, arrival_s=20.0, slo=SLO(130.0, 0.67), num_requests=2)  # deadline 150
    return ModalityQueueSnapshot(20.0, (QueuedJob(job2), QueuedJob(job3)))  # Job 1 ends at 20


def test_figure2_plan2_sinks_job3() -> None:
    plan2 = FIG2.options(2, 0.71).candidates[-1]
    assert plan2.latency_s == pytest.approx(120.0) and plan2.accuracy == pytest.approx(0.80)
    fastest3 = FIG2.options(2, 0.67).candidates[0]
    assert 20.0 + plan2.latency_s + fastest3.latency_s > 150.0


def test_figure2_optimized_reaches_plan4() -> None:
    plan = make_policy("optimized", FIG2, random.Random(0)).decide(_figure2_snapshot(), 20.0)
    assert plan.dropped == ()
    (a2, a3) = plan.assignments
    assert (a2.job_id, a3.job_id) == (2, 3)
    assert a2.strategy.accuracy == pytest.approx(0.735)  # Plan 3's Job 2: one audio request
    assert a2.strategy.latency_s == pytest.approx(80.0)  # Job 3 starts at 100
    assert a3.strategy.accuracy == pytest.approx(0.685)  # Plan 4: one audio, one video
    assert sorted(b.variant_name for b in a3.strategy.batches) == ["audio", "video"]
    assert 20.0 + a2.strategy.latency_s + a3.strategy.latency_s == pytest.approx(150.0)


def test_figure2_aggressive_is_plan3_like() -> None:
    plan = make_policy("aggressive", FIG2, random.Random(0)).decide(_figure2_snapshot(), 20.0)
    assert [a.strategy.accuracy for a in plan.assignments] == pytest.approx([0.735, 0.67])


def _random_queue(rng: random.Random, count: int, tables: ModalityTables) -> list[QueuedJob]:
    lo, hi = min(tables.model.accuracy), max(tables.model.accuracy)
    return [QueuedJob(Job(i, rng.uniform(0, 1), SLO(rng.uniform(0.05, 4.0),
                                                  rng.uniform(lo, hi + 0.01)),
                          rng.randint(1, 64))) for i in range(count)]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.sampled_from(["optimized", "random"]))
def test_returned_plans_meet_every_deadline(seed: int, count: int, name: str) -> None:
    rng = random.Random(seed)
    queue = _random_queue(rng, count, THREE)
    snap = ModalityQueueSnapshot(rng.uniform(0, 0.5), tuple(queue))
    plan = make_policy(name, THREE, random.Random(seed)).decide(snap, 0.25)
    by_id = {q.job.job_id: q for q in queue}
    t = max(0.25, snap.free_at_s)
    for a in plan.assignments:
        t += a.strategy.latency_s
        job = by_id[a.job_id]
        assert t <= job.job.deadline_s + DEADLINE_EPS_S
        assert a.strategy.num_requests == job.job.num_requests
        assert a.strategy.accuracy >= job.accuracy_slo - 1e-9
    assert len(plan.assignments) + len(plan.dropped) == count
    # Drops only when infeasible, and the kept set is maximal: any dropped job put back (all
    # kept jobs on their fastest strategies, EDF order) makes some job miss its deadline.
    kept_ids = {a.job_id for a in plan.assignments}
    for d in plan.dropped:
        job = by_id[d.job_id]
        if not THREE.options(job.job.num_requests, job.accuracy_slo).candidates:
            continue
        trial = sorted((by_id[i] for i in kept_ids | {d.job_id}),
                       key=lambda q: (q.job.deadline_s, q.job.arrival_s, q.job.job_id))
        t, fits = max(0.25, snap.free_at_s), True
        for q in trial:
            t += THREE.options(q.job.num_requests, q.accuracy_slo).candidates[0].latency_s
            fits = fits and t <= q.job.deadline_s + DEADLINE_EPS_S
        assert not fits


def _replan_jobs(queue: list[QueuedJob]) -> list[ReplanJob]:
    queue = sorted(queue, key=lambda q: (q.job.deadline_s, q.job.arrival_s, q.job.job_id))
    return [ReplanJob(q.job.job_id, q.job.deadline_s,
                      THREE.options(q.job.num_requests, q.accuracy_slo)) for q in queue]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000))
def test_greedy_is_feasible_and_close_to_exact(seed: int) -> None:
    rng = random.Random(seed)
    jobs = _replan_jobs(_random_queue(rng, rng.randint(2, 4), THREE))
    kept, _ = drop_pass(0.0, jobs)
    live = [jobs[p] for p in kept]
    exact = replan_exact(0.0, live, max_nodes=10**6)
    greedy = replan_greedy(0.0, live)
    assert exact is not None and is_feasible(0.0, live, exact) and is_feasible(0.0, live, greedy)
    value = lambda ch: sum(j.candidates[c].accuracy_points for j, c in zip(live, ch, strict=True))  # noqa: E731
    assert value(greedy) <= value(exact) + 1e-9
    total = sum(j.candidates[0].num_requests for j in live)
    assert (value(exact) - value(greedy)) / max(total, 1) < 0.05  # < 5 accuracy points/request


def test_optimized_keeps_max_accuracy_when_queue_is_light_and_degrades_under_load() -> None:
    pol = make_policy("optimized", THREE, random.Random(0))
    light = ModalityQueueSnapshot(0.0, (QueuedJob(Job(0, 0.0, SLO(10.0, 0.5), 8)),))
    (a,) = pol.decide(light, 0.0).assignments
    assert a.strategy.accuracy == pytest.approx(max(THREE.model.accuracy))
    opts = THREE.options(32, 0.5).candidates
    per_job_s = (opts[0].latency_s + opts[-1].latency_s) / 2  # all-fastest fits, all-max not
    heavy = tuple(QueuedJob(Job(i, 0.0, SLO(per_job_s * (i + 1), 0.5), 32)) for i in range(8))
    plan = pol.decide(ModalityQueueSnapshot(0.0, heavy), 0.0)
    assert plan.dropped == ()  # all fit at reduced accuracy
    assert min(x.strategy.accuracy for x in plan.assignments) < max(THREE.model.accuracy)
    # Queue drains: the last job alone gets its top strategy back.
    drained = ModalityQueueSnapshot(0.0, (QueuedJob(heavy[-1].job, plan.assignments[-1].strategy),))
    (back,) = pol.decide(drained, 0.0).assignments
    assert back.strategy.accuracy == pytest.approx(max(THREE.model.accuracy))


def test_aggressive_fastest_none_all_modalities_and_no_drops() -> None:
    queue = tuple(QueuedJob(Job(i, 0.0, SLO(0.01, 0.6), 16)) for i in range(5))
    snap = ModalityQueueSnapshot(0.0, queue)
    agg = make_policy("aggressive", THREE, random.Random(0)).decide(snap, 0.0)
    fastest = THREE.options(16, 0.6).candidates[0]
    assert agg.dropped == () and all(a.strategy == fastest for a in agg.assignments)
    none = make_policy("none", THREE, random.Random(0)).decide(snap, 0.0)
    all_idx = THREE.all_modality_index
    assert none.dropped == ()
    assert all(b.variant_index == all_idx for a in none.assignments for b in a.strategy.batches)
    opt = make_policy("optimized", THREE, random.Random(0)).decide(snap, 0.0)
    assert len(opt.dropped) == 5  # 10 ms cannot fit 16 requests on any strategy


def test_random_policy_is_seeded() -> None:
    queue = tuple(_random_queue(random.Random(3), 30, THREE))
    snap = ModalityQueueSnapshot(0.0, queue)
    plans = [make_policy("random", THREE, random.Random(7)).decide(snap, 0.0) for _ in range(2)]
    assert plans[0] == plans[1]


def test_unknown_policy_lists_valid_names() -> None:
    with pytest.raises(ValueError, match="optimized"):
        make_policy("clever", THREE, random.Random(0))


def test_replan_outcome_methods() -> None:
    jobs = _replan_jobs([QueuedJob(Job(0, 0.0, SLO(10.0, 0.5), 4))])
    assert replan(0.0, jobs).method == "all-max"
