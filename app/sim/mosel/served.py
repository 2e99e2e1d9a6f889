"""MOSEL served as the replicas serve it: each worker is a simulated replica (app/sim/replica/)
whose `Scheduler` (normally `policies.schedulers.mosel.MoselScheduler`) is asked through the
replicas' scheduling step (policies/schedulers/step.py) whenever the worker is idle.

A job of n requests is one call of n items sharing its deadline, accuracy floor and `job_id`.
Differences from the paper setting (sim.py), all of them the live replica's behaviour: the
scheduler is asked only when the worker is idle (so it sees every job that arrived meanwhile
and never drops one on arrival while busy); items past their deadline are answered
deadline-exceeded before each decision (`expire`), also under `aggressive` and `none`; a job's
strategy runs as sub-batches, one per decision; a job goes to the worker with the fewest open
jobs (the router sees calls, not strategies). Same seed, same result.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from app.sim.kernel import Kernel
from app.sim.mosel.metrics import JobRecord, drop_cause
from app.sim.replica.replica import SimReplica
from policies.modality.api import ModalityTables
from policies.schedulers.base import Drop, DropReason, PendingItem, Scheduler
from policies.types import Job

TASK = "mosel"
RATE_WINDOW_S = 1.0
EXPIRED = "expired"  # drop cause: the deadline passed while the job waited


class Priority(IntEnum):
    """As the replica simulator: a finishing batch frees its worker before an arrival at the
    same instant is queued; a scheduler's wake-up comes last."""

    BATCH_DONE = 0
    ARRIVAL = 1
    TICK = 2


@dataclass
class _JobState:
    """A job's items answered so far (served ones by batch, dropped ones with their cause)."""

    job: Job
    worker: int
    served: int = 0
    accuracy_points: float = 0.0
    finish_s: float = 0.0
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def answered(self) -> int:
        return self.served + sum(self.dropped.values())


class ServedMoselSimulation:
    """One run over a fixed list of jobs; `make_scheduler(worker index)` gives each worker its
    scheduler (the object the replica would run)."""

    def __init__(self, tables: ModalityTables, make_scheduler: Callable[[int], Scheduler],
                 num_workers: int, timer: Callable[[], float] = time.process_time) -> None:
        self.tables = tables
        self.timer = timer
        self.replicas: list[SimReplica] = []
        self._make_scheduler = make_scheduler
        self._num_workers = num_workers
        self.records: list[JobRecord] = []
        self.decision_s: list[float] = []
        self._kernel = Kernel()
        self._job_of: list[int] = []  # item index -> job id
        self._states: dict[int, _JobState] = {}

    def run(self, jobs: list[Job]) -> list[JobRecord]:
        max_items = max(1, sum(j.num_requests for j in jobs))
        self.replicas = [SimReplica(self._make_scheduler(i), RATE_WINDOW_S, max_items)
                         for i in range(self._num_workers)]
        self._kernel.feed([j.arrival_s for j in jobs], Priority.ARRIVAL,
                          lambda now, i: self._arrive(jobs[i], now))
        self._kernel.run()
        return self.records

    def _arrive(self, job: Job, now: float) -> None:
        k = min(range(len(self.replicas)), key=lambda i: (self.replicas[i].open_calls, i))
        rep = self.replicas[k]
        rep.open_calls += 1
        rep.rate.add(now, job.num_requests)
        self._states[job.job_id] = _JobState(job, k)
        for _ in range(job.num_requests):
            rep.push(PendingItem(item_id=str(len(self._job_of)), arrival_s=job.arrival_s,
                                 deadline_s=job.deadline_s, task=TASK,
                                 min_accuracy=job.slo.min_accuracy, job_id=str(job.job_id),
                                 job_size=job.num_requests))
            self._job_of.append(job.job_id)
        if rep.batch is None:
            self._step(k, now)

    def _step(self, k: int, now: float) -> None:
        """Worker `k` is idle: scheduling steps until it runs a batch or waits."""
        rep = self.replicas[k]
        while len(rep.queue) and rep.batch is None:
            expiry = rep.expire(rep.queue.pending(), now)
            self._drop([Drop(p.item_id, DropReason.DEADLINE_EXCEEDED) for p in expiry.expired],
                       now, EXPIRED)
            if not expiry.live:
                break
            t0 = self.timer()
            outcome = rep.decide(expiry.live, now, None, False)
            self.decision_s.append(self.timer() - t0)
            rep.drop(outcome.drops)
            self._drop(list(outcome.drops), now, None)
            if outcome.run is not None:
                batch = rep.start(outcome.run, now, self._service_s)
                self._kernel.at(now + batch.duration_s, Priority.BATCH_DONE, self._done, k)
            elif outcome.idle:
                at = rep.wake_at(now, outcome.wait_s)
                if at is not None:
                    self._kernel.at(at, Priority.TICK, self._tick, k)
                break

    def _service_s(self, variant: str, size: int) -> float:
        model = self.tables.model
        return model.latency(model.index(variant), size)

    def _tick(self, now: float, k: int) -> None:
        rep = self.replicas[k]
        if rep.take_wake(now) and rep.batch is None:
            self._step(k, now)

    def _done(self, now: float, k: int) -> None:
        batch = self.replicas[k].finish({})
        for item in batch.items:
            state = self._states[self._job_of[item]]
            state.served += 1
            state.accuracy_points += batch.expected_accuracy
            state.finish_s = now
            self._maybe_record(state)
        self._step(k, now)

    def _drop(self, drops: list[Drop], now: float, cause: str | None) -> None:
        """Answer dropped items; a job dropped by its scheduler gets the paper's cause
        (sim.drop_cause, the worker being free now)."""
        for d in drops:
            state = self._states[self._job_of[int(d.item_id)]]
            why = cause or drop_cause(self.tables, state.job, now, now)
            state.dropped[why] = state.dropped.get(why, 0) + 1
            self._maybe_record(state)

    def _maybe_record(self, state: _JobState) -> None:
        """Once every item of a job is answered: one record for its served part (accuracy =
        size-weighted over its batches) and one per drop cause."""
        job = state.job
        if state.answered < job.num_requests:
            return
        self.replicas[state.worker].open_calls -= 1
        floor = job.slo.min_accuracy or 0.0
        if state.served:
            self.records.append(JobRecord(job.job_id, state.worker, state.served, job.arrival_s,
                                          job.deadline_s, floor, state.finish_s,
                                          state.accuracy_points / state.served, False))
        for why, n in state.dropped.items():
            self.records.append(JobRecord(job.job_id, state.worker, n, job.arrival_s,
                                          job.deadline_s, floor, None, None, True, why))

