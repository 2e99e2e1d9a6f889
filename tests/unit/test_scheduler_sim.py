"""The scheduler simulator with the unchanged FixedScheduler on a hand-built profile."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.replica.request_metrics import summarize
from app.sim.replica.sim import SchedulerSimConfig, simulate
from app.sim.traces.spec import TraceSpec, arrival_times
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.schedulers.base import (
    BatchPlan,
    Drop,
    DropReason,
    PendingItem,
    Scheduler,
    SchedulerDecision,
)
from policies.schedulers.registry import make_scheduler
from policies.schedulers.step import StepInput, decide, expire, most_urgent_task
from policies.types import Variant


def _points(ms_by_batch: dict[int, float]) -> tuple[LatencyPoint, ...]:
    return tuple(LatencyPoint(b, ms, ms, ms, ms, 10) for b, ms in ms_by_batch.items())


def _profile() -> Profile:
    return Profile("toy", "cpu", (
        VariantProfile(Variant("small"), 0.70, _points({1: 10.0, 2: 12.0, 4: 16.0, 8: 24.0})),
        VariantProfile(Variant("big"), 0.90, _points({1: 40.0, 2: 50.0, 4: 70.0, 8: 110.0})),
    ))


def _run(arrivals: list[float], cfg: SchedulerSimConfig, name: str = "most_accurate",
         duration_s: float = 1.0):
    prof = _profile()
    return simulate(prof, lambda k: make_scheduler(name, prof), np.array(arrivals), duration_s, cfg)


def test_light_load_serves_each_alone_on_the_fixed_variant() -> None:
    arrivals = [0.0, 0.1, 0.2, 0.3]
    run = _run(arrivals, SchedulerSimConfig(replicas=1, slo_ms=100.0, overhead_ms=5.0))
    assert [r.index for r in run.records] == [0, 1, 2, 3]
    for r in run.records:
        assert r.outcome == "ok" and r.variant == "big" and r.batch_size == 1
        assert r.latency_ms == pytest.approx(45.0)
        assert r.compute_ms == pytest.approx(40.0) and r.queue_ms == pytest.approx(0.0)
        assert r.expected_accuracy == pytest.approx(0.9)
    s = run.summary
    assert (s.sent, s.ok, s.satisfied) == (4, 4, 4)
    assert s.goodput_qps == pytest.approx(4.0)
    assert s.overhead_p50_ms == pytest.approx(5.0)
    assert s.expected_accuracy_of_satisfied == pytest.approx(0.9)
    assert s.accuracy_of_satisfied == pytest.approx(0.9)  # expected accuracy stands in


def test_queue_builds_batches_that_meet_deadlines() -> None:
    # 4 requests at once: the first runs alone (queue empty when it came), then 3 in one batch.
    run = _run([0.0, 0.0, 0.0, 0.0], SchedulerSimConfig(replicas=1, slo_ms=200.0))
    sizes = [b.size for b in run.batches]
    assert sizes == [1, 3]
    lat = sorted(r.latency_ms for r in run.records)
    assert lat == pytest.approx([40.0, 40.0 + 60.0, 100.0, 100.0])  # b=3 -> 60 ms (linear fill)
    assert run.summary.satisfied == 4


def test_infeasible_items_are_dropped_and_recorded() -> None:
    # 20 simultaneous requests, SLO 90 ms: big b=1 takes 40 ms; later items cannot make it.
    run = _run([0.0] * 20, SchedulerSimConfig(replicas=1, slo_ms=90.0))
    outcomes = [r.outcome for r in run.records]
    assert len(outcomes) == 20
    assert set(outcomes) == {"ok", "deadline_exceeded"}
    s = run.summary
    assert s.ok + s.deadline_exceeded == 20
    assert all(r.latency_ms <= 90.0 + 1e-6 for r in run.records if r.outcome == "ok")
    assert s.slo_attainment == pytest.approx(s.ok / 20)


def test_round_robin_alternates_and_pow2_spreads() -> None:
    arrivals = [0.001 * i for i in range(8)]
    rr = _run(arrivals, SchedulerSimConfig(replicas=2, slo_ms=1000.0, routing="round_robin"))
    assert [r.replica for r in rr.records] == ["0", "1"] * 4
    p2 = _run(arrivals, SchedulerSimConfig(replicas=4, slo_ms=1000.0, routing="pow2"))
    used = {r.replica for r in p2.records}
    assert len(used) >= 3  # the shortest of two random replicas spreads a burst


def test_max_ongoing_backlog_still_answers_everyone() -> None:
    run = _run([0.0] * 12, SchedulerSimConfig(replicas=2, slo_ms=5000.0, max_ongoing=2))
    assert run.summary.ok == 12
    assert max(r.batch_size or 0 for r in run.records) <= 2


def test_same_trace_same_seed_is_deterministic_and_sampled_mode_runs() -> None:
    spec = TraceSpec("poisson", qps=150.0, duration_s=5.0, seed=3)
    arr = arrival_times(spec)
    cfg = SchedulerSimConfig(replicas=2, slo_ms=150.0, service="sampled", seed=3)
    a = _run(list(arr), cfg, duration_s=5.0)
    b = _run(list(arr), cfg, duration_s=5.0)
    assert a.summary == b.summary
    assert a.summary.sent == arr.size
    assert summarize(a.records, 5.0, 150.0) == a.summary
    fast = _run(list(arr), SchedulerSimConfig(replicas=2, slo_ms=150.0), name="fastest",
                duration_s=5.0)
    assert fast.summary.variant_share == {"small": 1.0}
    assert fast.summary.satisfied >= a.summary.satisfied


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="routing"):
        SchedulerSimConfig(replicas=1, slo_ms=1.0, routing="random")
    with pytest.raises(ValueError, match="service"):
        SchedulerSimConfig(replicas=1, slo_ms=1.0, service="p42")


def test_full_queue_sheds_and_late_items_expire() -> None:
    cfg = SchedulerSimConfig(replicas=1, slo_ms=1000.0, max_queued_items=3)
    run = _run([0.0] * 6, cfg)
    # The first starts at once (queue empties), three wait, the last two find the queue full.
    assert [r.outcome for r in run.records].count("shed") == 2
    assert run.summary.slo_attainment_admitted == pytest.approx(1.0)
    # RAMSIS-style policies serve late items; the replica loop expires them at their deadline.
    prof = _profile()
    late = simulate(prof, lambda k: _NeverDrops(prof), np.zeros(5), 1.0,
                    SchedulerSimConfig(replicas=1, slo_ms=100.0))
    assert [r.outcome for r in late.records] == ["ok", "ok", "ok", "deadline_exceeded",
                                                 "deadline_exceeded"]
    assert [r.latency_ms for r in late.records] == pytest.approx([40, 80, 120, 120, 120])
    assert late.summary.satisfied == 2


class _NeverDrops(Scheduler):
    """Always the head item alone on "big", however late."""

    name = "never_drops"

    def __init__(self, profile: Profile) -> None:
        self.variant = profile.by_name("big").variant

    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               load_qps: float) -> SchedulerDecision:
        return SchedulerDecision(run=BatchPlan(self.variant, (pending[0].item_id,), 0.9))


def test_jobs_share_a_replica_and_report_the_job_latency() -> None:
    cfg = SchedulerSimConfig(replicas=2, slo_ms=1000.0, job_size=4)
    run = _run([0.0, 0.5], cfg)
    assert [r.index for r in run.records] == list(range(8))
    first = run.records[:4]
    assert {r.job_id for r in first} == {"0"} and len({r.replica for r in first}) == 1
    # The whole job is queued before the replica decides: one batch of four (70 ms).
    assert all(r.latency_ms == pytest.approx(70.0) and r.batch_size == 4 for r in first)
    assert run.summary.ok == 8


def test_front_stage_queues_calls_before_the_replicas() -> None:
    cfg = SchedulerSimConfig(replicas=1, slo_ms=1000.0, front_ms_per_call=10.0)
    run = _run([0.0, 0.0, 0.0], cfg)
    # Calls leave the front at 10, 20, 30 ms; the first runs alone (10 -> 50 ms), the other two
    # then run together (50 -> 100 ms).
    assert [r.latency_ms for r in run.records] == pytest.approx([50.0, 100.0, 100.0])
    late = _run([0.0], SchedulerSimConfig(replicas=1, slo_ms=25.0, front_ms_per_call=30.0))
    assert late.records[0].outcome == "deadline_exceeded"
    assert late.records[0].latency_ms == pytest.approx(30.0)


def test_stack_delays_and_served_times_replace_overhead_and_profile() -> None:
    from app.sim.replica.served import CallTiming, StackDelays

    prof = _profile()
    stack = StackDelays([CallTiming(to_ingress_s=0.010, to_replica_s=0.020, back_s=0.015)])
    run = simulate(prof, lambda k: make_scheduler("most_accurate", prof), np.array([0.0]), 1.0,
                   SchedulerSimConfig(replicas=1, slo_ms=100.0, overhead_ms=99.0),
                   service_times=lambda variant, size: 0.060, stack=stack)
    # reaches the replica at 30 ms, runs 60 ms, answer back 15 ms later; queue from the ingress
    r = run.records[0]
    assert r.outcome == "ok" and r.latency_ms == pytest.approx(105.0)
    assert r.queue_ms == pytest.approx(20.0) and r.compute_ms == pytest.approx(60.0)
    # the server's deadline clock starts at the ingress (10 ms after the send): at the replica
    # (80 ms) 5 ms of a 75 ms SLO are left, too few for "big" (40 ms), so the call is dropped
    slow = StackDelays([CallTiming(to_ingress_s=0.010, to_replica_s=0.070, back_s=0.0)])
    late = simulate(prof, lambda k: make_scheduler("most_accurate", prof), np.array([0.0]), 1.0,
                    SchedulerSimConfig(replicas=1, slo_ms=75.0), stack=slow)
    assert late.records[0].outcome == "deadline_exceeded"
    assert late.records[0].latency_ms == pytest.approx(80.0)


def test_response_margin_shortens_the_replicas_deadline() -> None:
    # "big" takes 40 ms alone; a 45 ms SLO fits, but not with 10 ms kept for the way back
    ok = _run([0.0], SchedulerSimConfig(replicas=1, slo_ms=45.0))
    assert ok.records[0].outcome == "ok"
    kept = _run([0.0], SchedulerSimConfig(replicas=1, slo_ms=45.0, response_margin_ms=10.0))
    assert kept.records[0].outcome == "deadline_exceeded"


class _Sloppy(Scheduler):
    """Drops an item twice and one it was never shown; runs a dropped item with a live one."""

    name = "sloppy"

    def __init__(self, profile: Profile) -> None:
        self.variant = profile.by_name("small").variant

    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               load_qps: float) -> SchedulerDecision:
        first = pending[0].item_id
        drops = (Drop(first, DropReason.SHED), Drop(first, DropReason.DEADLINE_EXCEEDED),
                 Drop("never-queued", DropReason.SHED))
        ids = tuple(p.item_id for p in pending[:2])
        return SchedulerDecision(drops=drops, run=BatchPlan(self.variant, ids, 0.7))


def test_step_applies_only_what_concerns_the_offered_items() -> None:
    items = (PendingItem("a", 0.0, 0.5, "t"), PendingItem("b", 0.0, 0.9, "t"),
             PendingItem("c", 0.0, 0.7, "u"))
    late = expire(items, 0.5)
    assert [p.item_id for p in late.expired] == ["a"]
    offered = most_urgent_task(late.live)
    assert [p.item_id for p in offered] == ["b"]  # "c" is another task's: another scheduler
    out = decide(_Sloppy(_profile()), StepInput(items[:2], 0.1, 5.0))
    assert out.drops == (Drop("a", DropReason.SHED),)  # once, first reason; unknown ids ignored
    assert out.run is not None and out.run.item_ids == ("b",)  # the dropped item does not run
    assert not out.idle


def test_the_simulator_runs_the_mosel_and_otas_schedulers_the_replicas_run() -> None:
    from app.sim.mosel.profiles import load_profile
    from app.sim.otas.profile import figure4_profile

    tv = load_profile("tvlt-like")
    jobs = simulate(tv, lambda k: make_scheduler("mosel", tv), np.array([0.0, 0.2, 0.4]), 1.0,
                    SchedulerSimConfig(replicas=1, slo_ms=3000.0, job_size=8))
    assert [r.outcome for r in jobs.records] == ["ok"] * 24
    assert {b.variant for b in jobs.batches} <= set(tv.names())
    f4 = figure4_profile()
    arrivals = np.arange(0.0, 1.0, 0.005)
    otas = simulate(f4, lambda k: make_scheduler("otas", f4), arrivals, 1.0,
                    SchedulerSimConfig(replicas=1, slo_ms=200.0, task="cifar10"))
    assert otas.summary.sent == arrivals.size and otas.summary.ok > 0.9 * arrivals.size
    assert max(b.size for b in otas.batches) > 1  # Algorithm 1 batches the queue
