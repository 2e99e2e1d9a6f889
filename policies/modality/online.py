"""MOSEL online policies (section 7.1): optimized, random (Algorithm 1), aggressive, none.

Each policy is a plain object with `decide(snapshot, now_s) -> QueuePlan`. The snapshot is
the worker's queue (jobs not yet started, with their current strategies) and when the worker
frees up; the plan gives every kept job a strategy, in EDF execution order, and names the jobs
answered with an explicit drop. Randomness comes only from the injected `random.Random`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum

import numpy as np

from policies.modality.candidates import SMALL_QUEUE, FloatArray, IntArray
from policies.modality.matrix import Strategy
from policies.modality.replan import (
    DROP_RULES,
    ReplanJob,
    ReplanOutcome,
    is_feasible,
    replan,
    replan_packed,
)
from policies.modality.tables import ModalityTables
from policies.types import Job


@dataclass(frozen=True)
class QueuedJob:
    """A job waiting on a worker and the strategy it currently holds (None: just arrived)."""

    job: Job
    strategy: Strategy | None = None

    @property
    def accuracy_slo(self) -> float:
        return self.job.slo.min_accuracy or 0.0


@dataclass(frozen=True)
class ModalityQueueSnapshot:
    """A worker's queue: `free_at_s` is when its running job ends (<= now when idle)."""

    free_at_s: float
    jobs: tuple[QueuedJob, ...]


class DropReason(Enum):
    DEADLINE_INFEASIBLE = "deadline_infeasible"
    ACCURACY_INFEASIBLE = "accuracy_infeasible"


@dataclass(frozen=True, init=False)
class JobAssignment:
    job_id: int
    strategy: Strategy

    def __init__(self, job_id: int, strategy: Strategy) -> None:
        # A plan holds one per queued job (docs/mosel.md, decision cost): filling the instance
        # dict skips the frozen guard's object.__setattr__, about 40% of the construction.
        fields = self.__dict__
        fields["job_id"], fields["strategy"] = job_id, strategy


@dataclass(frozen=True, init=False)
class JobDrop:
    job_id: int
    reason: DropReason

    def __init__(self, job_id: int, reason: DropReason) -> None:
        fields = self.__dict__  # see JobAssignment
        fields["job_id"], fields["reason"] = job_id, reason


@dataclass(frozen=True)
class QueuePlan:
    """Kept jobs in execution (EDF) order with their strategies, and the explicit drops."""

    assignments: tuple[JobAssignment, ...]
    dropped: tuple[JobDrop, ...]
    method: str


def _edf(jobs: tuple[QueuedJob, ...]) -> list[QueuedJob]:
    return sorted(jobs, key=lambda q: (q.job.deadline_s, q.job.arrival_s, q.job.job_id))


def _edf_order(jobs: tuple[QueuedJob, ...]) -> tuple[IntArray, FloatArray]:
    """Positions of `_edf(jobs)` in `jobs`, and their deadlines. Sorting by deadline alone
    gives the same order when the deadlines are distinct (checked); else the full key."""
    deadlines = np.array([q.job.deadline_s for q in jobs], dtype=np.float64)
    order: IntArray = deadlines.argsort(kind="stable")
    ordered = deadlines[order]
    if not (ordered[1:] > ordered[:-1]).all():  # ties (or NaN): the full key decides
        key = [(q.job.deadline_s, q.job.arrival_s, q.job.job_id) for q in jobs]
        order = np.array(sorted(range(len(jobs)), key=key.__getitem__), dtype=np.int64)
        ordered = deadlines[order]
    return order, ordered


def _replan_jobs(tables: ModalityTables, queue: list[QueuedJob]) -> list[ReplanJob]:
    return [ReplanJob(q.job.job_id, q.job.deadline_s,
                      tables.options(q.job.num_requests, q.accuracy_slo)) for q in queue]


class OptimizedPolicy:
    """Highest accuracy by default; on a predicted violation, re-plan the queue to maximize
    size-weighted accuracy within every deadline. When no assignment fits, drop the fewest
    requests (`drops="fewest"`, default) or the first violator in EDF order (`"violator"`,
    the ablation `optimized-violator-drop`)."""

    name = "optimized"

    def __init__(self, tables: ModalityTables, rng: random.Random, exact_max_plans: int = 512,
                 drops: str = "fewest"):
        if drops not in DROP_RULES:
            raise ValueError(f"unknown drop rule {drops!r}; valid: {list(DROP_RULES)}")
        self.tables, self.rng, self.exact_max_plans = tables, rng, exact_max_plans
        self.drops = drops
        if drops != "fewest":
            self.name = f"optimized-{drops}-drop"

    def decide(self, snapshot: ModalityQueueSnapshot, now_s: float) -> QueuePlan:
        start_s = max(now_s, snapshot.free_at_s)
        queue, deadlines, ids = self._packed_queue(snapshot.jobs)
        job_ids = [q.job.job_id for q in queue]
        if ids is None:  # unusual sizes or levels: the per-job path (same decisions)
            replan_jobs = _replan_jobs(self.tables, queue)
            outcome = replan(start_s, replan_jobs, self.exact_max_plans, self.drops)
            return _plan(job_ids, [j.candidates for j in replan_jobs], outcome)
        outcome = replan_packed(start_s, deadlines, ids, self.tables.packed,
                                self.exact_max_plans, self.drops)
        every = self.tables.packed.sets
        return _plan(job_ids, [every[i].candidates for i in ids.tolist()], outcome)

    def _packed_queue(self, jobs: tuple[QueuedJob, ...]
                      ) -> tuple[list[QueuedJob], FloatArray, IntArray | None]:
        """The EDF queue, its deadlines and candidate-set rows (None: use `options`)."""
        if len(jobs) <= SMALL_QUEUE:  # plain Python: numpy's per-call cost dominates here
            queue = _edf(jobs)
            rows = [self.tables.set_id(q.job.num_requests, q.accuracy_slo) for q in queue]
            deadlines = np.array([q.job.deadline_s for q in queue], dtype=np.float64)
            if any(row is None for row in rows):
                return queue, deadlines, None
            return queue, deadlines, np.array(rows, dtype=np.int64)
        order, deadlines = _edf_order(jobs)
        ids = self.tables.set_ids(
            np.array([q.job.num_requests for q in jobs], dtype=np.int64)[order],
            np.array([q.accuracy_slo for q in jobs], dtype=np.float64)[order])
        return [jobs[i] for i in order.tolist()], deadlines, ids


def _plan(job_ids: list[int], candidates: list[tuple[Strategy, ...]],
          outcome: ReplanOutcome) -> QueuePlan:
    """The plan of a re-plan outcome (`job_ids`, `candidates`: per queue position, EDF)."""
    assignments = tuple([JobAssignment(job_ids[p], candidates[p][c])
                         for p, c in zip(outcome.kept, outcome.choices, strict=True)])
    deadline, accuracy = DropReason.DEADLINE_INFEASIBLE, DropReason.ACCURACY_INFEASIBLE
    dropped = tuple([JobDrop(job_ids[p], deadline if candidates[p] else accuracy)
                     for p in outcome.dropped])
    return QueuePlan(assignments, dropped, outcome.method)


def _drops(jobs: list[ReplanJob], positions: tuple[int, ...] | list[int]) -> tuple[JobDrop, ...]:
    return tuple(JobDrop(jobs[p].job_id, DropReason.DEADLINE_INFEASIBLE if jobs[p].candidates
                         else DropReason.ACCURACY_INFEASIBLE) for p in positions)


class RandomPolicy:
    """Algorithm 1: while some job is predicted late, move a random job among the violator
    and those before it to its fastest SLO-meeting strategy; drop the violator once all of
    them are at their fastest. When the queue drains (all-max fits), accuracy is raised."""

    name = "random"

    def __init__(self, tables: ModalityTables, rng: random.Random):
        self.tables, self.rng = tables, rng

    def decide(self, snapshot: ModalityQueueSnapshot, now_s: float) -> QueuePlan:
        start = max(now_s, snapshot.free_at_s)
        queue = _edf(snapshot.jobs)
        jobs = _replan_jobs(self.tables, queue)
        dropped = [p for p, j in enumerate(jobs) if not j.candidates]
        live = [p for p, j in enumerate(jobs) if j.candidates]
        top = {p: len(jobs[p].candidates) - 1 for p in live}
        if is_feasible(start, [jobs[p] for p in live], [top[p] for p in live]):
            return self._plan(jobs, live, top, dropped, "all-max")
        choice = {p: self._current_index(jobs[p], queue[p].strategy) for p in live}
        while True:
            violator = self._first_violator(start, jobs, live, choice)
            if violator is None:
                return self._plan(jobs, live, choice, dropped, "random")
            upto = live[: live.index(violator) + 1]
            slow = [p for p in upto if choice[p] > 0]
            if slow:
                choice[self.rng.choice(slow)] = 0
            else:
                live.remove(violator)
                dropped.append(violator)

    @staticmethod
    def _current_index(job: ReplanJob, current: Strategy | None) -> int:
        if current is not None and current in job.candidates:
            return job.candidates.index(current)
        return len(job.candidates) - 1

    @staticmethod
    def _first_violator(start: float, jobs: list[ReplanJob], live: list[int],
                        choice: dict[int, int]) -> int | None:
        t = start
        for p in live:
            t += jobs[p].candidates[choice[p]].latency_s
            if t > jobs[p].deadline_s + 1e-9:
                return p
        return None

    @staticmethod
    def _plan(jobs: list[ReplanJob], live: list[int], choice: dict[int, int],
              dropped: list[int], method: str) -> QueuePlan:
        return QueuePlan(tuple(JobAssignment(jobs[p].job_id, jobs[p].candidates[choice[p]])
                               for p in live), _drops(jobs, sorted(dropped)), method)


class AggressivePolicy:
    """Fastest SLO-meeting strategy for every job, regardless of deadlines (never drops a job
    whose accuracy SLO is reachable; late jobs run late)."""

    name = "aggressive"

    def __init__(self, tables: ModalityTables, rng: random.Random):
        self.tables, self.rng = tables, rng

    def decide(self, snapshot: ModalityQueueSnapshot, now_s: float) -> QueuePlan:
        jobs = _replan_jobs(self.tables, _edf(snapshot.jobs))
        keep = [j for j in jobs if j.candidates]
        drop = [p for p, j in enumerate(jobs) if not j.candidates]
        return QueuePlan(tuple(JobAssignment(j.job_id, j.candidates[0]) for j in keep),
                         _drops(jobs, drop), "aggressive")


class AgnosticPolicy:
    """Modality-agnostic baseline ('none'): every request on all modalities, never drops."""

    name = "none"

    def __init__(self, tables: ModalityTables, rng: random.Random):
        self.tables, self.rng = tables, rng

    def decide(self, snapshot: ModalityQueueSnapshot, now_s: float) -> QueuePlan:
        queue = _edf(snapshot.jobs)
        return QueuePlan(tuple(JobAssignment(q.job.job_id, self.tables.agnostic(
            q.job.num_requests)) for q in queue), (), "none")


ModalityPolicy = OptimizedPolicy | RandomPolicy | AggressivePolicy | AgnosticPolicy
_POLICIES: dict[str, type[ModalityPolicy]] = {
    "optimized": OptimizedPolicy, "random": RandomPolicy,
    "aggressive": AggressivePolicy, "none": AgnosticPolicy,
}
POLICY_NAMES = tuple(_POLICIES)
ABLATION_NAMES = ("optimized-violator-drop",)


def make_policy(name: str, tables: ModalityTables, rng: random.Random) -> ModalityPolicy:
    """The modality policy registered as `name` (POLICY_NAMES, or an ABLATION_NAMES entry)."""
    if name == "optimized-violator-drop":
        return OptimizedPolicy(tables, rng, drops="violator")
    try:
        cls = _POLICIES[name]
    except KeyError:
        valid = [*_POLICIES, *ABLATION_NAMES]
        raise ValueError(f"unknown modality policy {name!r}; valid: {valid}") from None
    return cls(tables, rng)
