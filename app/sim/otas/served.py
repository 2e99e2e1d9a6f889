"""OTAS served as the replicas serve it: one worker with the live replica's deadline queue and
arrival-rate window (policies/queue.py) and a `Scheduler` per task (normally
`policies.schedulers.otas.OtasScheduler`), asked through the replicas' scheduling step
(policies/schedulers/step.py) whenever the worker is idle, on the simulators' event kernel.

As in the live replica (deployments/classifier/loop.py): items past their deadline are answered
before each decision (`expire`); only the most urgent item's task is offered, to that task's
scheduler, so a batch holds one task; with nothing to run the worker waits for the scheduler's
hint, never past the earliest deadline, or for the next arrival. Outcomes follow section V's
four types as in the paper setting (sim.py): a dropped item is type 4 (evicted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from enum import IntEnum

from app.sim.kernel import Kernel
from app.sim.otas.sim import SimRun, run_worker
from app.sim.otas.trace import TraceQuery
from policies.queue import DeadlineQueue, QueuedItem, RateWindow
from policies.schedulers.base import BatchPlan, PendingItem, Scheduler
from policies.schedulers.otas import OtasScheduler
from policies.schedulers.step import StepInput, decide, expire, most_urgent_task
from policies.tokens.api import AllocationProblem, QueryResult, TokenProfile, classify

MIN_WAIT_S = 1e-6  # as the replica loop's


class Priority(IntEnum):
    """As the replica simulator: a finishing batch frees the worker before an arrival at the
    same instant is queued; a wake-up comes last."""

    BATCH_DONE = 0
    ARRIVAL = 1
    TICK = 2


def simulate_served(trace: Sequence[TraceQuery], schedulers: Mapping[str, Scheduler],
                    profile: TokenProfile, rate_window_s: float = 1.0,
                    keep_problems: bool = False) -> SimRun:
    """Serve `trace` with `schedulers[task]` for each task in it; the batch latency is the
    profile's at the gamma of the variant the scheduler names."""
    worker = _ServedWorker(trace, schedulers, profile, rate_window_s, keep_problems)
    return run_worker(worker, trace, Priority.ARRIVAL)


class _ServedWorker:
    """The replica's queue, rate window and wake-up between events, and the outcome tallies."""

    def __init__(self, trace: Sequence[TraceQuery], schedulers: Mapping[str, Scheduler],
                 profile: TokenProfile, rate_window_s: float, keep_problems: bool) -> None:
        self.trace, self.schedulers, self.profile = trace, schedulers, profile
        self.keep_problems = keep_problems
        self.by_id = {q.request.request_id: q for q in trace}
        self.queue = DeadlineQueue(max(1, len(trace)))
        self.rate = RateWindow(rate_window_s)
        self.running = False
        self.wake_s: float | None = None
        self.results: list[QueryResult] = []
        self.gamma_batches: Counter[int] = Counter()
        self.methods: Counter[str] = Counter()
        self.problems: list[AllocationProblem] = []
        self.kernel = Kernel()

    def on_arrival(self, now: float, i: int) -> None:
        r = self.trace[i].request
        self.rate.add(now)
        self.queue.push(QueuedItem(PendingItem(str(r.request_id), r.arrival_s, r.deadline_s,
                                               r.task, utility=r.slo.utility), {}, None))
        if not self.running:
            self.step(now)

    def step(self, now: float) -> None:
        """The worker is idle: scheduling steps until it runs a batch or waits."""
        while len(self.queue) and not self.running:
            expiry = expire(self.queue.pending(), now)
            self._evict([p.item_id for p in expiry.expired])
            if not expiry.live:
                return
            items = most_urgent_task(expiry.live)
            scheduler = self.schedulers[items[0].task]
            outcome = decide(scheduler, StepInput(items, now, self.rate.rate(now)))
            self._note(scheduler)
            self._evict([d.item_id for d in outcome.drops])
            if outcome.run is not None:
                self._run(now, outcome.run)
            elif outcome.idle:
                self._wait(now, outcome.wait_s)
                return

    def _note(self, scheduler: Scheduler) -> None:
        """The OTAS policy's method (and DP instance) behind the decision just taken."""
        decision = scheduler.last_decision if isinstance(scheduler, OtasScheduler) else None
        if decision is None:
            return
        self.methods[decision.method.value] += 1
        if self.keep_problems and decision.problem is not None:
            self.problems.append(decision.problem)

    def _run(self, now: float, plan: BatchPlan) -> None:
        items = self.queue.pop(plan.item_ids)
        gamma = plan.variant.gamma
        gi = self.profile.gamma_index(gamma)
        task = self.profile.task_key(items[0].pending.task)
        done = now + self.profile.batch_latency_s({task: len(items)}, gi)
        self.gamma_batches[gamma] += 1
        accuracy = self.profile.task_accuracy(task, gi)
        for q in items:
            query = self.by_id[int(q.item_id)]
            correct = query.correct_draw < accuracy
            self.results.append(QueryResult(query.request.request_id,
                                            classify(done, q.pending.deadline_s, correct),
                                            q.pending.utility, gamma, done))
        self.running = True
        self.kernel.at(done, Priority.BATCH_DONE, self.on_done)

    def on_done(self, now: float, _payload: int) -> None:
        self.running = False
        self.step(now)

    def _wait(self, now: float, wait_s: float | None) -> None:
        """Wake at the scheduler's hint, never past the earliest deadline (an arrival wakes the
        worker earlier); an earlier pending wake-up stands."""
        earliest = self.queue.earliest_deadline_s()
        if earliest is None:
            return
        until_deadline = earliest - now
        hint = wait_s if wait_s is not None else until_deadline
        at = now + max(min(hint, until_deadline), MIN_WAIT_S)
        if self.wake_s is not None and self.wake_s <= at:
            return
        self.wake_s = at
        self.kernel.at(at, Priority.TICK, self.on_tick)

    def on_tick(self, now: float, _payload: int) -> None:
        if self.wake_s != now:
            return  # superseded by an earlier wake-up
        self.wake_s = None
        if not self.running:
            self.step(now)

    def _evict(self, item_ids: list[str]) -> None:
        for q in self.queue.pop(item_ids):
            self.results.append(QueryResult(int(q.item_id),
                                            classify(None, q.pending.deadline_s, False),
                                            q.pending.utility))
