"""MOSEL experiment: seeded discrete-event simulation of workers with EDF job queues.

Two settings (`SETTINGS`, docs/mosel.md). "served" (default): each worker is a replica running
`policies.schedulers.mosel.MoselScheduler` through the replicas' scheduling step (served.py).
"paper": the paper's execution model, kept to reproduce the published figures: each worker runs
one job at a time (its whole strategy, non-preemptive, service time from the profile) and asks
the `policies.modality` policy (the object `MoselScheduler` wraps) for a plan whenever a job
arrives at the worker, also while it is busy, and whenever it is about to start its next job;
the plan's drops are answered at once; jobs go to the worker with the least predicted backlog.
Both run on the simulators' event kernel (app/sim/kernel.py). Same seed, same result.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

from app.sim.kernel import Kernel
from app.sim.mosel.metrics import PAPER_CAUSES, SERVED_CAUSES, JobRecord, drop_cause, summarize
from app.sim.mosel.profiles import load_profile, mosel_profile_from_profile
from app.sim.mosel.served import ServedMoselSimulation
from app.sim.mosel.workload import (
    WorkloadSpec,
    generate_jobs,
    job_size_pmf,
    load_trace_shape,
    rescale,
)
from policies.modality.api import (
    POLICY_NAMES,
    ModalityPolicy,
    ModalityQueueSnapshot,
    ModalityTables,
    QueuedJob,
    build_matrix,
    make_policy,
)
from policies.profile import Profile
from policies.schedulers.base import Scheduler
from policies.schedulers.mosel import MoselScheduler
from policies.schedulers.params import MoselParams
from policies.schedulers.plan_types import MoselPlan
from policies.schedulers.plans import build_mosel_plan
from policies.types import Job

SETTINGS = ("served", "paper")


class Priority(IntEnum):
    """An arrival is queued (and planned) before a job ending at the same instant frees its
    worker."""

    ARRIVAL = 0
    JOB_DONE = 1


@dataclass(frozen=True)
class _RunningJob:
    job: Job
    accuracy: float


@dataclass
class _Worker:
    index: int
    policy: ModalityPolicy
    queue: dict[int, QueuedJob] = field(default_factory=dict)
    free_at_s: float = 0.0
    running: _RunningJob | None = None

    def backlog_s(self, now_s: float) -> float:
        queued = sum(q.strategy.latency_s for q in self.queue.values() if q.strategy)
        return max(self.free_at_s - now_s, 0.0) + queued


class MoselSimulation:
    """The paper setting: one run of one policy over a fixed list of jobs."""

    def __init__(self, tables: ModalityTables, policy_name: str, num_workers: int, seed: int,
                 timer: Callable[[], float] = time.process_time) -> None:
        self.tables = tables
        self.workers = [_Worker(i, make_policy(policy_name, tables, random.Random(seed + i)))
                        for i in range(num_workers)]
        self.timer = timer
        self.records: list[JobRecord] = []
        self.decision_s: list[float] = []
        self._kernel = Kernel()

    def run(self, jobs: list[Job]) -> list[JobRecord]:
        self._kernel.feed([j.arrival_s for j in jobs], Priority.ARRIVAL,
                          lambda _now, i: self._arrive(jobs[i]))
        self._kernel.run()
        return self.records

    def _arrive(self, job: Job) -> None:
        now = job.arrival_s
        worker = min(self.workers, key=lambda w: (w.backlog_s(now), w.index))
        worker.queue[job.job_id] = QueuedJob(job)
        self._decide(worker, now)
        if worker.running is None:
            self._start_next(worker, now)

    def _decide(self, worker: _Worker, now: float) -> None:
        snap = ModalityQueueSnapshot(max(worker.free_at_s, now), tuple(worker.queue.values()))
        t0 = self.timer()
        plan = worker.policy.decide(snap, now)
        self.decision_s.append(self.timer() - t0)
        for drop in plan.dropped:
            q = worker.queue.pop(drop.job_id)
            self._record(worker, q.job, None, None, dropped=True,
                         drop_cause=drop_cause(self.tables, q.job, snap.free_at_s, now))
        order = {a.job_id: a for a in plan.assignments}
        worker.queue = {jid: QueuedJob(worker.queue[jid].job, a.strategy)
                        for jid, a in order.items()}

    def _start_next(self, worker: _Worker, now: float) -> None:
        if not worker.queue:
            return
        self._decide(worker, now)
        if not worker.queue:
            return
        job_id = next(iter(worker.queue))  # plans are in EDF execution order
        q = worker.queue.pop(job_id)
        if q.strategy is None:
            raise RuntimeError(f"policy left job {job_id} without a strategy")
        worker.free_at_s = now + q.strategy.latency_s
        worker.running = _RunningJob(q.job, q.strategy.accuracy)
        self._kernel.at(worker.free_at_s, Priority.JOB_DONE, self._finish, worker.index)

    def _finish(self, now: float, index: int) -> None:
        worker = self.workers[index]
        done, worker.running = worker.running, None
        if done is None:
            raise RuntimeError(f"worker {index} finished without a running job")
        self._record(worker, done.job, now, done.accuracy, dropped=False)
        self._start_next(worker, now)

    def _record(self, worker: _Worker, job: Job, finish_s: float | None,
                accuracy: float | None, dropped: bool, drop_cause: str | None = None) -> None:
        self.records.append(JobRecord(job.job_id, worker.index, job.num_requests,
                                      job.arrival_s, job.deadline_s,
                                      job.slo.min_accuracy or 0.0, finish_s, accuracy, dropped,
                                      drop_cause))


def all_modality_capacity_qps(tables: ModalityTables, max_job_size: int) -> float:
    """Requests/s one worker sustains on all modalities, over the job-size distribution."""
    pmf = job_size_pmf(max_job_size)
    mean_n = sum(n * p for n, p in enumerate(pmf, start=1))
    mean_lat = sum(tables.agnostic(n).latency_s * p for n, p in enumerate(pmf, start=1))
    return mean_n / mean_lat


def build_tables(profile: Profile, max_job_size: int = 64, num_levels: int = 20,
                 percentile: str = "mean") -> ModalityTables:
    """Offline stage for a profile: `mosel_profile_from_profile`, then the strategy matrix."""
    mosel = mosel_profile_from_profile(profile, percentile, max_job_size)
    matrix = build_matrix(mosel.model, max_job_size, num_levels, solver="exact")
    return ModalityTables(matrix, mosel.model, mosel.all_modality_index)


def served_plan(profile: Profile, max_job_size: int = 64, num_levels: int = 20) -> MoselPlan:
    """The plan file a replica would read: the matrix on mean latencies, batches up to the job
    size (the same matrix `build_tables` builds)."""
    return build_mosel_plan(profile, max_job_size, num_levels, "mean", max_job_size)


def served_schedulers(profile: Profile, plan: MoselPlan, policy: str,
                      seed: int) -> Callable[[int], Scheduler]:
    """Worker i's scheduler as a replica builds it (`make_scheduler("mosel", ...)`): a
    `MoselScheduler` over `plan`, its random policy seeded seed + i as in the paper setting."""
    return lambda i: MoselScheduler(profile, plan, MoselParams(policy=policy, seed=seed + i))


def _simulate(tables: ModalityTables, profile: Profile, policy: str, num_workers: int,
              seed: int, plan: MoselPlan | None) -> MoselSimulation | ServedMoselSimulation:
    """The paper setting without a plan, the served one with the replicas' plan."""
    if plan is None:
        return MoselSimulation(tables, policy, num_workers, seed)
    return ServedMoselSimulation(tables, served_schedulers(profile, plan, policy, seed),
                                 num_workers)


def run_mosel_experiment(profile: str | Profile = "tvlt-like",
                         policies: tuple[str, ...] = POLICY_NAMES, seed: int = 0,
                         num_workers: int = 1, *, data_dir: Path, setting: str = "served",
                         max_job_size: int = 64, num_levels: int = 20,
                         min_qps: float = 5.0, peak_capacity_factor: float = 2.0,
                         queue_allowance_s: tuple[float, float] = (0.5, 2.0)) -> dict[str, Any]:
    """Run every policy on the same seeded jobs in `setting` ("served" or "paper", see the
    module doc); returns per-policy summaries and ratios. The load follows the Twitter trace in
    `data_dir` (the shared data directory)."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown MOSEL setting {setting!r}; valid: {list(SETTINGS)}")
    prof = load_profile(profile) if isinstance(profile, str) else profile
    tables = build_tables(prof, max_job_size, num_levels)
    capacity = all_modality_capacity_qps(tables, max_job_size) * num_workers
    qps = rescale(load_trace_shape(data_dir), min_qps, peak_capacity_factor * capacity)
    acc = tables.model.accuracy
    spec = WorkloadSpec(min_qps, peak_capacity_factor * capacity, min(acc), max(acc),
                        max_job_size, queue_allowance_s[0], queue_allowance_s[1])
    solo = [tables.agnostic(n).latency_s for n in range(1, max_job_size + 1)]
    jobs = generate_jobs(spec, qps, solo, random.Random(seed))
    horizon = len(qps) * spec.step_s
    plan = None if setting == "paper" else served_plan(prof, max_job_size, num_levels)
    causes = PAPER_CAUSES if plan is None else SERVED_CAUSES
    results: dict[str, Any] = {}
    for name in policies:
        sim = _simulate(tables, prof, name, num_workers, seed, plan)
        results[name] = summarize(sim.run(jobs), sim.decision_s, horizon, spec.step_s, causes)
    base = results.get("none", {}).get("met_both_slos", 0)
    ratios = {name: (r["met_both_slos"] / base if base else float("inf"))
              for name, r in results.items()}
    return {
        "profile": prof.name, "variants": list(tables.model.names),
        "accuracy": list(acc), "seed": seed, "num_workers": num_workers, "setting": setting,
        "all_modality_capacity_qps": capacity, "qps_steps": qps,
        "num_jobs": len(jobs), "num_requests": sum(j.num_requests for j in jobs),
        "policies": results, "met_both_vs_none": ratios,
    }
