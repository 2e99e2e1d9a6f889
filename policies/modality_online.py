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

from policies.modality_matrix import (
    Strategy,
    best_partitions,
    level_index,
    strategy_from_batches,
)
from policies.modality_replan import DROP_RULES, CandidateSet, ReplanJob, is_feasible, replan
from policies.modality_solvers import StrategyMatrix
from policies.profile import LatencyModel
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


@dataclass(frozen=True)
class JobAssignment:
    job_id: int
    strategy: Strategy


@dataclass(frozen=True)
class JobDrop:
    job_id: int
    reason: DropReason


@dataclass(frozen=True)
class QueuePlan:
    """Kept jobs in execution (EDF) order with their strategies, and the explicit drops."""

    assignments: tuple[JobAssignment, ...]
    dropped: tuple[JobDrop, ...]
    method: str


class ModalityTables:
    """Everything the online stage precomputes from the offline matrix: candidate sets (with
    hulls) per (job size, level) and the modality-agnostic strategy per job size."""

    def __init__(self, matrix: StrategyMatrix, model: LatencyModel,
                 all_modality_index: int) -> None:
        self.matrix = matrix
        self.model = model
        self.all_modality_index = all_modality_index
        levels = matrix.accuracy_levels
        self._sets = tuple(
            tuple(CandidateSet.of(matrix.candidates(n, a)) for a in levels)
            for n in range(1, matrix.max_job_size + 1))
        _, parts = best_partitions(model, all_modality_index, matrix.max_job_size)
        self._agnostic = tuple(
            strategy_from_batches(model, [(all_modality_index, b) for b in parts[n]])
            for n in range(1, matrix.max_job_size + 1))
        self._empty = CandidateSet.of(())

    def options(self, num_requests: int, accuracy_slo: float) -> CandidateSet:
        level = level_index(self.matrix.accuracy_levels, accuracy_slo)
        if level is None:
            return self._empty
        return self._sets[num_requests - 1][level]

    def agnostic(self, num_requests: int) -> Strategy:
        return self._agnostic[num_requests - 1]


def _edf(jobs: tuple[QueuedJob, ...]) -> list[QueuedJob]:
    return sorted(jobs, key=lambda q: (q.job.deadline_s, q.job.arrival_s, q.job.job_id))


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
        queue = _edf(snapshot.jobs)
        jobs = _replan_jobs(self.tables, queue)
        outcome = replan(max(now_s, snapshot.free_at_s), jobs, self.exact_max_plans,
                         self.drops)
        assignments = tuple(JobAssignment(jobs[p].job_id, jobs[p].candidates[c])
                            for p, c in zip(outcome.kept, outcome.choices, strict=True))
        return QueuePlan(assignments, _drops(jobs, outcome.dropped), outcome.method)


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
