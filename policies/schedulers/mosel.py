"""MOSEL modality selection as a replica scheduler.

Items carry `job_id` / `job_size` / `min_accuracy`: a job is the pending items of one task
sharing a `job_id` (an item without one is a job of its own); jobs larger than the plan's
`max_job_size` are planned in chunks. Whenever no job is in progress, the queue of jobs (EDF)
goes to the MOSEL online policy with the offline strategy matrix: "optimized" keeps each job on
its most accurate strategy and re-plans the whole queue when a deadline is at risk, dropping a
job only when no assignment fits; "random" (Algorithm 1), "aggressive" and "none" (all
modalities, never drops) are the paper's alternatives. The first job of the plan then starts
and runs its strategy's sub-batches (each a `BatchPlan` on one modality variant) back to back,
non-preemptively, one per `decide` call, as the paper's workers do.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from policies.modality.api import (
    ModalityQueueSnapshot,
    ModalityTables,
    QueuedJob,
    Strategy,
    make_policy,
)
from policies.profile import Profile
from policies.schedulers.base import (
    BatchPlan,
    Drop,
    DropReason,
    PendingItem,
    Scheduler,
    SchedulerDecision,
)
from policies.schedulers.common import expect_plan
from policies.schedulers.params import AllModalitiesParams, MoselParams
from policies.schedulers.plan_types import MoselPlan, Plan
from policies.schedulers.plans import build_mosel_plan, mosel_matrix, plan_model
from policies.types import SLO, Job

_MIN_SLO_S = 1e-9
JobKey = tuple[str, str, int]  # task, job id (or item id), chunk


@dataclass
class _Active:
    key: JobKey
    remaining: list[tuple[int, int]]  # (variant index, batch size) still to run


class MoselScheduler(Scheduler):
    """MOSEL over a replica's queue (`policy`: optimized | random | aggressive | none)."""

    def __init__(self, profile: Profile, matrix_plan: MoselPlan,
                 params: MoselParams | AllModalitiesParams) -> None:
        self.name = params.scheduler
        self.profile = profile
        self._params = params
        self._install(matrix_plan)
        self._ids: dict[JobKey, int] = {}
        self._next_id = 0
        self._strategies: dict[int, Strategy] = {}
        self._active: _Active | None = None

    def _install(self, matrix_plan: MoselPlan) -> None:
        """Latency model, tables and online policy from the plan (the model is the plan's: its
        strategies' latencies are recomputed from the profile as it was built)."""
        params = self._params
        self.plan_id = matrix_plan.plan_id
        self.model = plan_model(self.profile, matrix_plan.percentile, matrix_plan.max_batch_size)
        self.max_batch_size = min(self.model.max_batch_size, params.max_batch_size or 1 << 30)
        matrix = mosel_matrix(matrix_plan, self.model)
        all_index = self.model.index(matrix_plan.all_modalities_variant)
        self.tables = ModalityTables(matrix, self.model, all_index)
        self.max_job_size = matrix.max_job_size
        online, seed = ((params.policy, params.seed) if isinstance(params, MoselParams)
                        else ("none", 0))
        self.policy = make_policy(online, self.tables, random.Random(seed))
        self._fastest_s = min(self.model.latency(i, 1) for i in range(len(self.model.names)))

    def _jobs(self, pending: tuple[PendingItem, ...]) -> dict[JobKey, list[PendingItem]]:
        """Pending items by job (deadline order within a job), chunked to the matrix size."""
        groups: dict[tuple[str, str], list[PendingItem]] = {}
        for p in pending:
            groups.setdefault((p.task, p.job_id if p.job_id is not None else p.item_id),
                              []).append(p)
        out: dict[JobKey, list[PendingItem]] = {}
        for (task, job), items in groups.items():
            for c in range(0, len(items), self.max_job_size):
                out[(task, job, c // self.max_job_size)] = items[c:c + self.max_job_size]
        return out

    def _job_id(self, key: JobKey) -> int:
        if key not in self._ids:
            self._ids[key] = self._next_id
            self._next_id += 1
        return self._ids[key]

    def _batch(self, items: list[PendingItem], variant_index: int, size: int) -> BatchPlan:
        vp = self.profile.by_name(self.model.names[variant_index])
        return BatchPlan(vp.variant, tuple(p.item_id for p in items[:size]), vp.accuracy)

    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               load_qps: float) -> SchedulerDecision:
        jobs = self._jobs(pending)
        run = self._continue(jobs)
        if run is not None:
            return SchedulerDecision(run=run)
        queued = []
        by_id: dict[int, JobKey] = {}
        for key, items in jobs.items():
            jid = self._job_id(key)
            by_id[jid] = key
            arrival = min(p.arrival_s for p in items)
            deadline = min(p.deadline_s for p in items)
            floor = next((p.min_accuracy for p in items if p.min_accuracy is not None), None)
            job = Job(jid, arrival, SLO(max(deadline - arrival, _MIN_SLO_S), floor), len(items))
            held = self._strategies.get(jid)
            if held is not None and held.num_requests != len(items):
                held = None
            queued.append(QueuedJob(job, held))
        plan = self.policy.decide(ModalityQueueSnapshot(now_s, tuple(queued)), now_s)
        drops: list[Drop] = []
        for d in plan.dropped:
            items = jobs[by_id[d.job_id]]
            late = now_s + self._fastest_s > min(p.deadline_s for p in items)
            reason = DropReason.DEADLINE_EXCEEDED if late else DropReason.SHED
            drops.extend(Drop(p.item_id, reason) for p in items)
        self._strategies = {a.job_id: a.strategy for a in plan.assignments}
        self._ids = {k: v for k, v in self._ids.items() if k in jobs}
        if plan.assignments:
            first = plan.assignments[0]
            key = by_id[first.job_id]
            cap = self.max_batch_size
            self._active = _Active(key, [(b.variant_index, min(cap, b.batch_size - c))
                                         for b in first.strategy.batches
                                         for c in range(0, b.batch_size, cap)])
            run = self._continue(jobs)
        return SchedulerDecision(drops=tuple(drops), run=run)

    def _continue(self, jobs: dict[JobKey, list[PendingItem]]) -> BatchPlan | None:
        """The active job's next sub-batch, or None (and no active job) when it is done."""
        active = self._active
        if active is None:
            return None
        items = jobs.get(active.key)
        if not items or not active.remaining:
            self._active = None
            self._strategies.pop(self._ids.get(active.key, -1), None)
            return None
        variant_index, size = active.remaining.pop(0)
        if not active.remaining:
            self._active = None
        return self._batch(items, variant_index, max(1, size))

    def update_plan(self, plan: Plan) -> None:
        """A new `MoselPlan` (built for this profile); the running job finishes on its
        strategy, queued jobs are re-planned on the new matrix."""
        self._install(expect_plan(self, plan, MoselPlan))
        self._strategies = {}


def make_mosel(profile: Profile, given: Plan | None,
               params: MoselParams | AllModalitiesParams) -> Scheduler:
    """`mosel` runs the online policy of its params; `all_modalities` is the modality-agnostic
    baseline (every request on all modalities, never drops). Without a plan one is built now
    (`max_job_size`, `num_levels`, percentile default mean)."""
    if given is None:
        given = build_mosel_plan(profile, params.max_job_size, params.num_levels,
                                 params.percentile or "mean", params.max_batch_size)
    return MoselScheduler(profile, expect_plan(params.scheduler, given, MoselPlan), params)
