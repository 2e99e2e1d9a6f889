"""OTAS allocators: exact == exhaustive, Algorithm 2 <= exact, deadlines respected."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.tokens.api import (
    AllocationProblem,
    allocate_alg2,
    allocate_exact,
    allocate_exhaustive,
    allocate_rate_table,
    evaluate,
)

TOL = 1e-9


@st.composite
def problems(draw: st.DrawFn, max_batches: int = 5, max_gammas: int = 3) -> AllocationProblem:
    n = draw(st.integers(0, max_batches))
    g = draw(st.integers(1, max_gammas))
    now = draw(st.floats(0.0, 5.0))
    deadlines = sorted(draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)))
    latency = [tuple(draw(st.lists(st.floats(0.01, 0.4), min_size=g, max_size=g)))
               for _ in range(n)]
    utility = [tuple(draw(st.lists(st.floats(0.0, 10.0), min_size=g, max_size=g)))
               for _ in range(n)]
    return AllocationProblem(now, tuple(now + d for d in deadlines), tuple(latency),
                             tuple(utility))


def assert_feasible(problem: AllocationProblem, gamma_indices: tuple[int | None, ...]) -> None:
    clock = problem.now_s
    for b, g in enumerate(gamma_indices):
        if g is None:
            continue
        clock += problem.latency_s[b][g]
        assert clock < problem.deadlines_s[b], f"batch {b} finishes at {clock}"


@settings(max_examples=300, deadline=None)
@given(problems())
def test_exact_equals_exhaustive(problem: AllocationProblem) -> None:
    exact, brute = allocate_exact(problem), allocate_exhaustive(problem)
    assert abs(exact.expected_utility - brute.expected_utility) <= TOL
    assert exact.repaired_batches == 0
    assert_feasible(problem, exact.gamma_indices)
    assert abs(evaluate(problem, exact.gamma_indices).expected_utility
               - exact.expected_utility) <= TOL


@settings(max_examples=300, deadline=None)
@given(problems(max_batches=7, max_gammas=4))
def test_alg2_never_beats_exact_and_respects_deadlines(problem: AllocationProblem) -> None:
    alg2, exact = allocate_alg2(problem), allocate_exact(problem)
    assert alg2.expected_utility <= exact.expected_utility + TOL
    assert_feasible(problem, alg2.gamma_indices)
    assert_feasible(problem, exact.gamma_indices)
    assert len(alg2.gamma_indices) == problem.num_batches


def test_alg2_loses_the_earlier_clock_path() -> None:
    """Batch 0: slow gamma worth 2.0 or fast gamma worth 1.9; batch 1 never fits; batch 2
    (worth 5) fits only after the fast gamma. Algorithm 2's "skip batch 1" cell keeps the 2.0
    path with its late clock, so batch 2 looks infeasible: 2.0 instead of 6.9."""
    problem = AllocationProblem(
        0.0, (0.6, 0.6, 0.6),
        ((0.5, 0.1), (2.0, 2.0), (0.4, 0.4)),
        ((2.0, 1.9), (1.0, 1.0), (5.0, 5.0)))
    assert abs(allocate_exact(problem).expected_utility - 6.9) <= TOL
    assert abs(allocate_alg2(problem).expected_utility - 2.0) <= TOL


def test_large_queue_exact_at_least_alg2() -> None:
    rng = random.Random(3)
    for _ in range(20):
        n = 50
        deadlines = tuple(sorted(rng.uniform(0.05, 1.0) for _ in range(n)))
        latency = tuple(tuple(rng.uniform(0.01, 0.1) for _ in range(8)) for _ in range(n))
        utility = tuple(tuple(rng.uniform(0.0, 20.0) for _ in range(8)) for _ in range(n))
        problem = AllocationProblem(0.0, deadlines, latency, utility)
        exact, alg2 = allocate_exact(problem), allocate_alg2(problem)
        assert exact.expected_utility >= alg2.expected_utility - TOL
        assert_feasible(problem, exact.gamma_indices)
        assert_feasible(problem, alg2.gamma_indices)


def test_rate_table_allocation_kappa_rule() -> None:
    # gammas ascending: index 0 fastest; rate says index 1.
    problem = AllocationProblem(
        0.0, (0.05, 0.06, 0.06),
        ((0.01, 0.02, 0.03),) * 3, ((1.0, 2.0, 3.0),) * 3)
    plan = allocate_rate_table(problem, [0.5, 0.9, 0.5], rate_gamma_index=1, kappa=0.8)
    # batch 0: the rate's gamma; batch 1: mean utility 0.9 > kappa -> largest gamma;
    # batch 2: clock 0.02 + 0.03 + 0.02 >= 0.06 -> smallest gamma.
    assert plan.gamma_indices == (1, 2, 0)
