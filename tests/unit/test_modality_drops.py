"""Drop rules of the optimized policy: fewest dropped requests (exact) vs the EDF violator."""

from __future__ import annotations

import itertools
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from app.sim.mosel.profiles import all_modality_index, three_modality_profile
from policies.modality.api import (
    DEADLINE_EPS_S,
    ModalityQueueSnapshot,
    ModalityTables,
    QueuedJob,
    ReplanJob,
    build_matrix,
    drop_fewest,
    drop_pass,
    make_policy,
)
from policies.profile import LatencyModel
from policies.types import SLO, Job

_PROFILE = three_modality_profile()
_MODEL = LatencyModel.from_profile(_PROFILE, "mean", 64)
THREE = ModalityTables(build_matrix(_MODEL, 64, 20), _MODEL, all_modality_index(_PROFILE))


def _jobs(rng: random.Random, count: int) -> list[ReplanJob]:
    lo, hi = min(THREE.model.accuracy), max(THREE.model.accuracy)
    raw = [(rng.uniform(0.02, 1.5), rng.uniform(lo, hi + 0.01), rng.randint(1, 64))
           for _ in range(count)]
    raw.sort()
    return [ReplanJob(i, d, THREE.options(n, a)) for i, (d, a, n) in enumerate(raw)]


def _size(job: ReplanJob) -> int:
    return job.candidates[0].num_requests if job.candidates else 0


def _fits(start: float, jobs: list[ReplanJob], kept: tuple[int, ...] | list[int]) -> bool:
    t = start
    for p in kept:
        if not jobs[p].candidates:
            return False
        t += jobs[p].candidates[0].latency_s
        if t > jobs[p].deadline_s + DEADLINE_EPS_S:
            return False
    return True


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 9))
def test_drop_fewest_matches_brute_force(seed: int, count: int) -> None:
    rng = random.Random(seed)
    jobs, start = _jobs(rng, count), rng.uniform(0.0, 0.3)
    kept, dropped = drop_fewest(start, jobs)
    assert sorted(kept + dropped) == list(range(count))
    assert _fits(start, jobs, kept)
    best = max(sum(_size(jobs[p]) for p in subset)
               for r in range(count + 1) for subset in itertools.combinations(range(count), r)
               if _fits(start, jobs, subset))
    assert sum(_size(jobs[p]) for p in kept) == best
    v_kept, _ = drop_pass(start, jobs)
    assert sum(_size(jobs[p]) for p in kept) >= sum(_size(jobs[p]) for p in v_kept)


def test_newcomer_does_not_push_out_a_large_queued_job() -> None:
    big = THREE.options(50, 0.6).candidates[0].latency_s
    small = THREE.options(3, 0.6).candidates[0].latency_s
    queue = (QueuedJob(Job(0, 0.0, SLO(big + small / 2, 0.6), 50)),   # queued, tight
             QueuedJob(Job(1, 0.0, SLO(small + 1e-6, 0.6), 3)))  # newcomer, earlier deadline
    snap = ModalityQueueSnapshot(0.0, queue)
    fewest = make_policy("optimized", THREE, random.Random(0)).decide(snap, 0.0)
    violator = make_policy("optimized-violator-drop", THREE, random.Random(0)).decide(snap, 0.0)
    assert [d.job_id for d in fewest.dropped] == [1] and [a.job_id for a in fewest.assignments] == [0]
    assert [d.job_id for d in violator.dropped] == [0]


def test_drop_fewest_falls_back_above_max_jobs() -> None:
    jobs = _jobs(random.Random(5), 30)
    assert drop_fewest(0.0, jobs, max_jobs=0) == drop_pass(0.0, jobs)
