"""The classifier replica's queue and scheduling loop, without Ray (a stub batch runner)."""

from __future__ import annotations

import asyncio

import pytest

from deployments.classifier.loop import LoopSettings, ReplicaLoop
from deployments.wire import ItemStatus
from policies.queue import DeadlineQueue, QueuedItem, RateWindow
from policies.schedulers.base import PendingItem, Scheduler, SchedulerDecision
from policies.schedulers.registry import make_scheduler
from policies.schedulers.step import expire
from tests.helpers.serving_loop import item, profile, runner


def make_loop(run, max_items: int = 16, sched: Scheduler | None = None) -> ReplicaLoop:
    s = sched or make_scheduler("most_accurate", profile(), None, {"max_batch_size": 8})
    return ReplicaLoop(LoopSettings("r0", max_items, 5.0), {"t": s}, run)


def test_queue_orders_by_deadline_and_expires() -> None:
    q = DeadlineQueue(3)
    for i, d in enumerate([3.0, 1.0, 2.0]):
        q.push(QueuedItem(PendingItem(f"i{i}", 0.0, d, "t"), {}, None))
    assert [p.item_id for p in q.pending()] == ["i1", "i2", "i0"]
    assert q.free_slots() == 0
    with pytest.raises(OverflowError):
        q.push(QueuedItem(PendingItem("i9", 0.0, 9.0, "t"), {}, None))
    late = expire(q.pending(), 2.0)
    assert [p.item_id for p in late.expired] == ["i1", "i2"]
    assert [p.item_id for p in late.live] == ["i0"]
    assert [x.item_id for x in q.pop([p.item_id for p in late.expired])] == ["i1", "i2"]
    assert [x.item_id for x in q.pop(("i0", "nope"))] == ["i0"] and len(q) == 0


def test_rate_window() -> None:
    r = RateWindow(2.0)
    for t in range(10):
        r.add(t * 0.1)
    assert r.rate(0.9) == pytest.approx(10 / 0.9, rel=0.01)
    assert r.rate(10.0) == 0.0


def test_items_are_batched_and_answered_with_decisions() -> None:
    run = runner()

    async def go():
        loop = make_loop(run)
        first = asyncio.create_task(loop.submit([item(0)]))
        await asyncio.sleep(0.005)
        rest = await loop.submit([item(i) for i in range(1, 6)])
        out = [await first, rest]
        await loop.stop()
        return out
    single, rest = asyncio.run(go())
    results = single + rest
    assert [r.status for r in results] == [ItemStatus.OK] * 6
    assert [r.label for r in results] == list(range(6))
    d = results[-1].decision
    assert d is not None and d.variant == "big" and d.replica == "r0" and d.deadline_met
    assert d.expected_accuracy == pytest.approx(0.9)
    assert max(run.calls) > 1  # queued items were batched while the first batch ran


def test_full_queue_sheds_and_late_items_expire() -> None:
    async def go():
        loop = make_loop(runner(0.05), max_items=2)
        out = await loop.submit([item(0), item(1), item(2), item(3, slo_s=-1.0)])
        await loop.stop()
        return out, loop.counters.take()[0]
    results, counters = asyncio.run(go())
    statuses = [r.status for r in results]
    assert statuses[:2] == [ItemStatus.OK, ItemStatus.OK]
    assert statuses[2] is ItemStatus.SHED and "queue full" in (results[2].error or "")
    assert statuses[3] is ItemStatus.DEADLINE_EXCEEDED
    assert counters["shed"] == 1 and counters["deadline_exceeded"] == 1 and counters["ok"] == 2


def test_infeasible_deadline_is_answered_not_lost() -> None:
    async def go():
        loop = make_loop(runner(0.0))
        out = await loop.submit([item(0, slo_s=0.002)])
        await loop.stop()
        return out
    (r,) = asyncio.run(go())
    assert r.status is ItemStatus.DEADLINE_EXCEEDED


def test_failing_batch_answers_error_and_loop_survives() -> None:
    bad = runner(fail=True)

    async def go():
        loop = make_loop(bad)
        first = await loop.submit([item(0)])
        loop.run_batch = runner()
        second = await loop.submit([item(1)])
        await loop.stop()
        return first, second
    first, second = asyncio.run(go())
    assert first[0].status is ItemStatus.ERROR and first[0].error_type == "internal_error"
    assert "boom" in (first[0].error or "")
    assert second[0].status is ItemStatus.OK


class Broken(Scheduler):
    name = "broken"

    def decide(self, pending, now_s, load_qps) -> SchedulerDecision:
        raise ValueError("policy bug")


def test_scheduler_exception_answers_error() -> None:
    async def go():
        loop = make_loop(runner(), sched=Broken())
        out = await loop.submit([item(0), item(1)])
        await loop.stop()
        return out
    results = asyncio.run(go())
    assert all(r.status is ItemStatus.ERROR for r in results)
    assert "policy bug" in (results[0].error or "")
