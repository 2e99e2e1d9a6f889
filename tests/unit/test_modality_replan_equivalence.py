"""The packed-array re-plan returns exactly the plans of the implementation it replaced
(tests/helpers/modality_replan_reference.py): same assignments, same drops, same method."""

from __future__ import annotations

import random

import numpy as np
import pytest

from app.sim.mosel.profiles import load_profile
from app.sim.mosel.sim import build_tables
from policies.modality.api import (
    CandidateSet,
    ModalityQueueSnapshot,
    ModalityTables,
    QueuedJob,
    ReplanJob,
    Strategy,
    StrategyBatch,
    drop_fewest,
    drop_pass,
    make_policy,
    replan,
    replan_greedy,
)
from policies.modality.greedy import _search_steps
from policies.types import SLO, Job
from tests.helpers import modality_replan_reference as reference

TABLES = {name: build_tables(load_profile(name)) for name in ("tvlt-like", "three-modality")}
SIZES = (1, 2, 3, 5, 8, 13, 25, 40, 70, 100)


def _snapshot(rng: random.Random, tables: ModalityTables, count: int) -> ModalityQueueSnapshot:
    """A random queue: some SLOs unreachable, some deadlines tied (coarse grid)."""
    lo, hi = min(tables.model.accuracy), max(tables.model.accuracy)
    horizon_s, grid_s = rng.choice((0.5, 2.0, 20.0, 60.0)), rng.choice((0.0, 0.0, 0.25))
    jobs = []
    for job_id in rng.sample(range(1000 * count), count):  # ids out of queue order
        arrival_s = rng.choice((0.0, rng.uniform(0.0, 1.0)))
        latency_s = rng.uniform(0.05, horizon_s)
        if grid_s:
            latency_s = grid_s * (1 + round(latency_s / grid_s))
        slo = SLO(latency_s, min(1.0, rng.uniform(lo - 0.05, hi + 0.02)))
        jobs.append(QueuedJob(Job(job_id, arrival_s, slo, rng.randint(1, 64))))
    return ModalityQueueSnapshot(rng.uniform(0.0, 0.5), tuple(jobs))


@pytest.mark.parametrize("profile", sorted(TABLES))
@pytest.mark.parametrize("drops", ["fewest", "violator"])
def test_decide_matches_reference(profile: str, drops: str) -> None:
    tables, rng = TABLES[profile], random.Random(f"{profile}-{drops}")
    name = "optimized" if drops == "fewest" else "optimized-violator-drop"
    policy = make_policy(name, tables, random.Random(0))
    methods = set()
    for trial in range(120):
        snapshot = _snapshot(rng, tables, SIZES[trial % len(SIZES)])
        plan = policy.decide(snapshot, 0.1)
        assert plan == reference.decide_optimized(tables, snapshot, 0.1, drops), trial
        methods.add(plan.method)
    assert methods == {"all-max", "exact", "greedy"}


def test_unusual_job_sizes_take_the_per_job_path() -> None:
    tables = TABLES["three-modality"]
    policy = make_policy("optimized", tables, random.Random(0))
    zero = ModalityQueueSnapshot(0.0, (QueuedJob(Job(1, 0.0, SLO(0.5, 0.6), 0)),
                                       QueuedJob(Job(2, 0.0, SLO(0.4, 0.6), 3))))
    assert policy.decide(zero, 0.0) == reference.decide_optimized(tables, zero, 0.0)
    long = ModalityQueueSnapshot(0.0, zero.jobs + _snapshot(random.Random(3), tables, 30).jobs)
    assert policy.decide(long, 0.0) == reference.decide_optimized(tables, long, 0.0)
    too_big = ModalityQueueSnapshot(0.0, (QueuedJob(Job(1, 0.0, SLO(0.5, 0.6), 65)),))
    for decide in (lambda: policy.decide(too_big, 0.0),
                   lambda: reference.decide_optimized(tables, too_big, 0.0)):
        with pytest.raises(IndexError):
            decide()


def _irregular_set(rng: random.Random) -> CandidateSet:
    """Candidates in no particular order (not a Pareto row): the shortcuts must not apply."""
    strategies = []
    for _ in range(rng.randint(0, 6)):
        size = rng.randint(0, 4)
        batches = (StrategyBatch(0, "a", size),) if size else ()
        strategies.append(Strategy(batches, rng.uniform(0.0, 0.3), rng.uniform(0.0, 3.0)))
    return CandidateSet.of(tuple(strategies))


def test_functions_match_reference_on_irregular_sets() -> None:
    rng = random.Random(7)
    for _ in range(300):
        start_s = rng.uniform(0.0, 0.2)
        jobs = sorted((ReplanJob(i, rng.uniform(0.0, 1.5), _irregular_set(rng))
                       for i in range(rng.randint(1, 12))), key=lambda j: j.deadline_s)
        assert drop_pass(start_s, jobs) == reference.drop_pass(start_s, jobs)
        assert drop_fewest(start_s, jobs) == reference.drop_fewest(start_s, jobs)
        assert replan(start_s, jobs, exact_max_plans=4) == reference.replan(start_s, jobs, 4)
        kept, _ = reference.drop_pass(start_s, jobs)
        live = [jobs[p] for p in kept]
        assert replan_greedy(start_s, live) == reference.replan_greedy(start_s, live)


@pytest.mark.parametrize("profile", sorted(TABLES))
def test_threshold_search_is_exact_at_the_boundary(profile: str) -> None:
    """Budgets equal to (or one ulp under) the queue's completion times at some price: any
    rounding difference between the search and the per-price check would flip the answer."""
    tables, rng = TABLES[profile], random.Random(profile)
    packed = tables.packed
    for trial in range(60):
        ids = np.array([rng.randrange(len(packed.sets) - 1) for _ in range(rng.randint(1, 100))])
        width = int(packed.hull_width[ids].max())
        if not width:
            continue
        ratios, deltas = packed.ratios[ids, :width].copy(), packed.deltas_s[ids, :width].copy()
        base = packed.fastest_s[ids]
        price = rng.choice(ratios[np.isfinite(ratios)].tolist())
        budget = np.cumsum(base + (deltas * (ratios >= price)).sum(axis=1))
        if trial % 2:
            budget = np.nextafter(budget, -np.inf)
        expected = reference._threshold_steps(ratios, deltas, base, budget)
        found = _search_steps(packed.ratios[ids], packed.step_latency_s[width, ids], budget)
        assert found.tolist() == expected, trial
