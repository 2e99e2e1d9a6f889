"""The classifier replica's scheduling loop (asyncio, no Ray): queue, ask the scheduler, run.

`submit` queues items and awaits their answers; one background task repeatedly takes the
scheduling step the simulator takes too (policies/schedulers/step.py: expire late items, ask the
scheduler of the most urgent item's task in profile time), answers the drops and runs the batch
on a single worker thread (the model is never called concurrently). Any exception while
deciding or running answers the affected items with status "error"; the loop goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from deployments.classifier.counters import ReplicaCounters
from deployments.models.base import Prediction
from deployments.wire import ItemDecision, ItemResult, ItemStatus, WorkItem
from policies.queue import DeadlineQueue, QueuedItem, RateWindow
from policies.schedulers.base import BatchPlan, DropReason, PendingItem, Scheduler
from policies.schedulers.slowdown import SlowdownTracker
from policies.schedulers.step import StepInput, decide, expire, most_urgent_task
from policies.types import Variant

log = logging.getLogger(__name__)

BatchRunner = Callable[[Variant, str, list[dict[str, Any]]], list[Prediction]]
ProfileLookup = Callable[[str, str, int], float | None]
MIN_WAIT_S = 0.001


@dataclass(frozen=True)
class LoopSettings:
    replica_id: str
    max_queued_items: int
    window_s: float
    latency_feedback: bool = True  # policies see the queue in profile time (slowdown.py)


class ReplicaLoop:
    """Owns the queue, the per-task schedulers and the worker thread of one replica."""

    def __init__(self, settings: LoopSettings, schedulers: dict[str, Scheduler],
                 run_batch: BatchRunner, clock: Callable[[], float] = time.time,
                 profile_ms: ProfileLookup | None = None) -> None:
        self.settings = settings
        self.schedulers = schedulers
        self.run_batch = run_batch
        self.clock = clock
        self.profile_ms = profile_ms  # (task, variant, batch size) -> profiled p50 ms
        self.slowdown = SlowdownTracker()
        self.queue = DeadlineQueue(settings.max_queued_items)
        self.rate = RateWindow(settings.window_s)
        self.counters = ReplicaCounters()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # ---- intake -------------------------------------------------------------------------
    async def submit(self, items: list[WorkItem]) -> list[ItemResult]:
        """Queue `items` (shedding what does not fit) and wait for every answer."""
        self._ensure_running()
        now = self.clock()
        self.rate.add(now, len(items))
        self.counters.arrived(len(items))
        loop = asyncio.get_running_loop()
        waiters: list[asyncio.Future[ItemResult]] = []
        for item in items:
            fut: asyncio.Future[ItemResult] = loop.create_future()
            waiters.append(fut)
            if item.task not in self.schedulers:
                self._answer(fut, ItemResult(item.item_id, ItemStatus.ERROR,
                                             error=f"task {item.task!r} not served here",
                                             error_type="internal_error"))
            elif item.deadline_s <= now:
                self._answer(fut, ItemResult(item.item_id, ItemStatus.DEADLINE_EXCEEDED,
                                             error="deadline passed before the item was queued"))
            elif not self.queue.free_slots():
                self._answer(fut, ItemResult(
                    item.item_id, ItemStatus.SHED,
                    error=f"replica queue full ({self.queue.max_items} items); retry later"))
            else:
                self.queue.push(QueuedItem(_pending(item), item.tensors, fut, now))
        self._wake.set()
        return list(await asyncio.gather(*waiters))

    async def run_in_worker(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn` on the model thread (warm-up uses it so that thread is the warm one)."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def load_qps(self) -> float:
        return self.rate.rate(self.clock())

    def slowdown_factor(self) -> float:
        """Live batch time / profiled (1.0 without latency feedback or a profile)."""
        if not self.settings.latency_feedback or self.profile_ms is None:
            return 1.0
        return self.slowdown.factor

    # ---- loop ---------------------------------------------------------------------------
    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="sched-loop")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        for q in self.queue.drain():
            self._answer(q.waiter, ItemResult(q.item_id, ItemStatus.ERROR,
                                              error="replica shutting down",
                                              error_type="replica_unavailable"))
        self._executor.shutdown(wait=False)

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            if not len(self.queue):
                await self._wake.wait()
                continue
            try:
                wait_s = await self._step()
            except Exception:  # keep serving whatever went wrong
                log.exception("scheduling step failed")
                wait_s = MIN_WAIT_S
            if wait_s is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout=max(wait_s, MIN_WAIT_S))

    async def _step(self) -> float | None:
        """One decision (policies/schedulers/step.py, as the simulator's); returns how long to
        wait before the next one (None: decide again)."""
        now = self.clock()
        pending = most_urgent_task(self._expire(now))
        if not pending:
            return None
        task = pending[0].task
        try:
            outcome = decide(self.schedulers[task], StepInput(
                pending, now, self.rate.rate(now), self.slowdown_factor()))
        except Exception as exc:  # a policy bug must not stop the replica
            log.exception("scheduler for task %s failed", task)
            self._fail(self.queue.pop([p.item_id for p in pending]), f"scheduler error: {exc}")
            return None
        for drop in outcome.drops:
            status = (ItemStatus.SHED if drop.reason is DropReason.SHED
                      else ItemStatus.DEADLINE_EXCEEDED)
            for q in self.queue.pop([drop.item_id]):
                self._answer(q.waiter, ItemResult(q.item_id, status, error=_drop_message(status)))
        if outcome.run is not None:
            await self._execute(outcome.run, task)
            return None
        if outcome.drops:
            return None
        return self._idle_wait(now, outcome.wait_s)

    def _idle_wait(self, now: float, wait_s: float | None) -> float:
        """Wait for the scheduler's hint, but never past the earliest deadline."""
        earliest = self.queue.earliest_deadline_s()
        until_deadline = (earliest - now) if earliest is not None else 1.0
        hint = wait_s if wait_s is not None else until_deadline
        return max(min(hint, until_deadline), MIN_WAIT_S)

    def _expire(self, now: float) -> tuple[PendingItem, ...]:
        """Forget items their callers gave up on, answer the late ones; returns the rest."""
        for q in self.queue.pop([q.item_id for q in self.queue if q.waiter.done()]):
            log.debug("item %s abandoned by its caller", q.item_id)
        expiry = expire(self.queue.pending(), now)
        for q in self.queue.pop([p.item_id for p in expiry.expired]):
            self._answer(q.waiter, ItemResult(q.item_id, ItemStatus.DEADLINE_EXCEEDED,
                                              error=_drop_message(ItemStatus.DEADLINE_EXCEEDED)))
        return expiry.live

    async def _execute(self, plan: BatchPlan, task: str) -> None:
        items = self.queue.pop(plan.item_ids)
        if not items:
            return
        self.counters.batch(len(items))
        start = self.clock()
        try:
            preds = await asyncio.get_running_loop().run_in_executor(
                self._executor, self.run_batch, plan.variant, task, [q.tensors for q in items])
            if len(preds) != len(items):
                raise RuntimeError(f"model returned {len(preds)} predictions for {len(items)}")
        except Exception as exc:  # one bad batch must not stop the replica
            log.exception("batch on %s failed", plan.variant.name)
            self._fail(items, f"batch failed: {type(exc).__name__}: {exc}")
            return
        end = self.clock()
        if self.profile_ms is not None:
            self.slowdown.observe(self.profile_ms(task, plan.variant.name, len(items)),
                                  (end - start) * 1000.0)
        for q, pred in zip(items, preds, strict=True):
            decision = self._decision(plan, q, len(items), start, end)
            self._answer(q.waiter, ItemResult(q.item_id, ItemStatus.OK, label=int(pred.label),
                                              confidence=float(pred.confidence),
                                              label_name=pred.name,
                                              decision=decision))

    def _decision(self, plan: BatchPlan, q: QueuedItem, size: int, start: float,
                  end: float) -> ItemDecision:
        v, p = plan.variant, q.pending
        return ItemDecision(
            variant=v.name, model=v.model or v.name, modalities=tuple(sorted(v.modalities)),
            gamma=v.gamma, expected_accuracy=float(plan.expected_accuracy), batch_size=size,
            queue_ms=max(start - p.arrival_s, 0.0) * 1000.0, compute_ms=(end - start) * 1000.0,
            deadline_met=end <= p.deadline_s, replica=self.settings.replica_id,
            dispatch_ms=max(q.queued_s - p.arrival_s, 0.0) * 1000.0)

    def _fail(self, items: list[QueuedItem], message: str) -> None:
        for q in items:
            self._answer(q.waiter, ItemResult(q.item_id, ItemStatus.ERROR, error=message,
                                              error_type="internal_error"))

    def _answer(self, waiter: asyncio.Future[ItemResult], result: ItemResult) -> None:
        self.counters.answered(result)
        if not waiter.done():
            waiter.set_result(result)


def _pending(item: WorkItem) -> PendingItem:
    return PendingItem(item_id=item.item_id, arrival_s=item.arrival_s,
                       deadline_s=item.deadline_s, task=item.task, utility=item.utility,
                       min_accuracy=item.min_accuracy, job_id=item.job_id,
                       job_size=item.job_size)


def _drop_message(status: ItemStatus) -> str:
    if status is ItemStatus.SHED:
        return "shed by the scheduling policy under load"
    return "deadline cannot be met any more"
