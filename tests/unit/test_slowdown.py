"""Latency feedback: the slowdown tracker, the dilated queue, and both users (the replica loop
and the simulator) acting on it."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from app.sim.replica.sim import SchedulerSimConfig, simulate
from deployments.classifier.loop import LoopSettings, ReplicaLoop
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.schedulers.base import Drop, DropReason, PendingItem, SchedulerDecision
from policies.schedulers.registry import make_scheduler
from policies.schedulers.slowdown import SlowdownSettings, SlowdownTracker, dilate, undilate
from policies.types import Variant
from tests.helpers.serving_loop import item, profile, runner


def test_tracker_median_ignores_small_batches_and_clips() -> None:
    t = SlowdownTracker(SlowdownSettings(window=4, min_samples=3, min_profile_ms=2.0, hi=3.0))
    t.observe(10.0, 20.0)
    t.observe(10.0, 20.0)
    assert t.factor == 1.0  # fewer than min_samples
    t.observe(1.0, 50.0)  # profiled under 2 ms: mostly fixed overhead, not counted
    t.observe(None, 50.0)  # not profiled
    t.observe(20.0, 30.0)
    assert t.factor == pytest.approx(2.0)  # median of 2, 2, 1.5
    for _ in range(4):
        t.observe(10.0, 100.0)
    assert t.factor == 3.0  # window of the last 4 (all 10x), clipped


def test_dilate_scales_slack_age_and_load() -> None:
    p = (PendingItem("a", arrival_s=9.0, deadline_s=11.0, task="t"),)
    seen, load = dilate(p, 10.0, 5.0, 2.0)
    assert (seen[0].arrival_s, seen[0].deadline_s, load) == pytest.approx((9.5, 10.5, 10.0))
    assert dilate(p, 10.0, 5.0, 1.0) == (p, 5.0)
    d = SchedulerDecision(drops=(Drop("a", DropReason.SHED),), wait_s=0.1)
    assert undilate(d, 2.0).wait_s == pytest.approx(0.2) and undilate(d, 2.0).drops == d.drops


def test_replica_loop_plans_with_the_measured_slowdown() -> None:
    # "big" is profiled at 10 ms for one item; the stub runs every batch in 25 ms (2.5x). Once
    # that is measured, a 20 ms SLO is known to be out of reach and the item is dropped at once
    # instead of running a batch that will miss; without feedback it runs and misses.
    prof = profile()
    lookup = {("t", v.variant.name, p.batch_size): p.p50_ms
              for v in prof.variants for p in v.latency}

    async def go(feedback: bool) -> tuple[float, str, bool | None]:
        loop = ReplicaLoop(LoopSettings("r0", 16, 5.0, latency_feedback=feedback),
                           {"t": make_scheduler("most_accurate", prof, None,
                                                {"max_batch_size": 1})},
                           runner(0.025), profile_ms=lambda t, v, b: lookup.get((t, v, b)))
        for i in range(5):
            await loop.submit([item(i)])
        factor = loop.slowdown_factor()
        (late,) = await loop.submit([item(9, slo_s=0.02)])
        await loop.stop()
        return factor, late.status.value, late.decision.deadline_met if late.decision else None

    factor, status, _ = asyncio.run(go(True))
    assert 2.0 < factor < 3.0 and status == "deadline_exceeded"
    factor, status, met = asyncio.run(go(False))
    assert factor == 1.0 and status == "ok" and met is False


def test_simulator_feedback_matches_the_loop() -> None:
    prof = Profile("toy", "cpu", (VariantProfile(Variant("big"), 0.9, tuple(
        LatencyPoint(b, 10.0, 10.0, 10.0, 10.0, 10) for b in (1, 2))),))
    arrivals = np.arange(11) * 0.1  # one every 100 ms; each runs 25 ms (profile: 10 ms)

    def run(feedback: bool) -> list[str]:
        cfg = SchedulerSimConfig(replicas=1, slo_ms=20.0, latency_feedback=feedback)
        sim = simulate(prof, lambda k: make_scheduler("most_accurate", prof, None,
                                                      {"max_batch_size": 1}),
                       arrivals, 2.0, cfg, service_times=lambda v, b: 0.025)
        return [r.outcome for r in sim.records]

    assert run(False) == ["ok"] * 11  # each runs and misses its 20 ms
    # four batches measure the slowdown (min_samples), then the rest are dropped up front
    assert run(True) == ["ok"] * 4 + ["deadline_exceeded"] * 7
