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
from typing import Any

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
    SchedulerStats,
)
from policies.schedulers.plans import build_mosel_plan, load_mosel_matrix, plan_model
from policies.types import SLO, Job

_MIN_SLO_S = 1e-9
JobKey = tuple[str, str, int]  # task, job id (or item id), chunk


@dataclass
class _Active:
    key: JobKey
    remaining: list[tuple[int, int]]  # (variant index, batch size) still to run


class MoselScheduler(Scheduler):
    """MOSEL over a replica's queue (`policy`: optimized | random | aggressive | none)."""

    def __init__(self, profile: Profile, plan_dict: dict[str, Any], policy: str = "optimized",
                 seed: int = 0, name: str = "mosel", max_batch_size: int | None = None) -> None:
        self.name = name
        self.profile = profile
        self.plan_id = str(plan_dict.get("plan_id", ""))
        self.model = plan_model(profile, plan_dict, {})
        self._cap = max_batch_size
        self.max_batch_size = min(self.model.max_batch_size, max_batch_size or 1 << 30)
        matrix = load_mosel_matrix(plan_dict, self.model)
        all_index = self.model.index(str(plan_dict["all_modalities_variant"]))
        self.tables = ModalityTables(matrix, self.model, all_index)
        self.max_job_size = matrix.max_job_size
        self.policy = make_policy(policy, self.tables, random.Random(seed))
        self._policy_name, self._seed = policy, seed
        self._fastest_s = min(self.model.latency(i, 1) for i in range(len(self.model.names)))
        self._ids: dict[JobKey, int] = {}
        self._next_id = 0
        self._strategies: dict[int, Strategy] = {}
        self._active: _Active | None = None
        self._counts = {"jobs_started": 0.0, "batches": 0.0, "jobs_dropped": 0.0,
                        "items_dropped": 0.0}

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
        self._counts["batches"] += 1
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
            self._counts["jobs_dropped"] += 1
            self._counts["items_dropped"] += len(items)
        self._strategies = {a.job_id: a.strategy for a in plan.assignments}
        self._ids = {k: v for k, v in self._ids.items() if k in jobs}
        if plan.assignments:
            first = plan.assignments[0]
            key = by_id[first.job_id]
            cap = self.max_batch_size
            self._active = _Active(key, [(b.variant_index, min(cap, b.batch_size - c))
                                         for b in first.strategy.batches
                                         for c in range(0, b.batch_size, cap)])
            self._counts["jobs_started"] += 1
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

    def stats(self) -> SchedulerStats:
        extra = dict(self._counts)
        extra["active_job"] = float(self._active is not None)
        return SchedulerStats(policy=self.name, plan_version=self.plan_id, extra=extra)

    def update_plan(self, plan_dict: dict[str, Any]) -> None:
        """A new `mosel_matrix` plan (built for this profile); the running job finishes on its
        strategy, queued jobs are re-planned on the new matrix."""
        fresh = MoselScheduler(self.profile, plan_dict, self._policy_name, self._seed, self.name,
                               self._cap)
        self.model, self.tables, self.policy = fresh.model, fresh.tables, fresh.policy
        self.max_job_size, self.max_batch_size = fresh.max_job_size, fresh.max_batch_size
        self._fastest_s, self.plan_id = fresh._fastest_s, fresh.plan_id
        self._strategies = {}


def _plan(profile: Profile, plan_dict: dict[str, Any] | None,
          params: dict[str, Any]) -> dict[str, Any]:
    if plan_dict is not None:
        return plan_dict
    return build_mosel_plan(profile, int(params.get("max_job_size", 64)),
                            int(params.get("num_levels", 20)),
                            str(params.get("percentile", "mean")),
                            params.get("max_batch_size"))


def _cap(params: dict[str, Any]) -> int | None:
    cap = params.get("max_batch_size")
    return None if cap is None else int(cap)


def make_mosel(profile: Profile, plan_dict: dict[str, Any] | None,
               params: dict[str, Any]) -> Scheduler:
    """Param `policy`: optimized (default) | random | aggressive | none; `seed` for random."""
    policy = str(params.get("policy", "optimized"))
    return MoselScheduler(profile, _plan(profile, plan_dict, params), policy,
                          int(params.get("seed", 0)), "mosel", _cap(params))


def make_all_modalities(profile: Profile, plan_dict: dict[str, Any] | None,
                        params: dict[str, Any]) -> Scheduler:
    """The modality-agnostic baseline: every request on all modalities, never drops."""
    return MoselScheduler(profile, _plan(profile, plan_dict, params), "none", 0,
                          "all_modalities", _cap(params))
