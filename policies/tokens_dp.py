"""Token allocation over a deadline-sorted batch queue: OTAS Algorithm 2, an exact allocator and
exhaustive search (the reference the tests compare both against).

All three solve problem (1) of the paper restricted to deadline order: choose for every batch a
gamma index or "not executed" so that, executing the chosen batches back to back from `now_s`,
each finishes strictly before its deadline, maximizing the summed expected utility. Restricting
to deadline order loses nothing: for fixed gammas, a set of batches that can all meet their
deadlines in some order meets them in earliest-deadline order.

Algorithm 2 keeps, per (batch, gamma of that batch), only the highest-utility path and its clock,
so a lower-utility path that finishes earlier (and would leave room for later batches) is lost.
`allocate_exact` keeps the whole Pareto front of (clock, utility) instead, pruned with an upper
bound on the utility still reachable, which makes it exact.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

NEG_INF = -math.inf


@dataclass(frozen=True)
class AllocationProblem:
    """Inputs of one allocation. Batches are sorted by deadline; rows are per batch, columns per
    gamma index (gammas in the caller's order)."""

    now_s: float
    deadlines_s: tuple[float, ...]
    latency_s: tuple[tuple[float, ...], ...]
    utility: tuple[tuple[float, ...], ...]

    def __post_init__(self) -> None:
        n = len(self.deadlines_s)
        if len(self.latency_s) != n or len(self.utility) != n:
            raise ValueError("deadlines, latency and utility need one row per batch")
        widths = {len(row) for row in self.latency_s + self.utility}
        if len(widths) > 1:
            raise ValueError(f"rows have different numbers of gammas: {sorted(widths)}")
        if any(b < a for a, b in itertools.pairwise(self.deadlines_s)):
            raise ValueError("batches must be sorted by deadline")

    @property
    def num_batches(self) -> int:
        return len(self.deadlines_s)

    @property
    def num_gammas(self) -> int:
        return len(self.latency_s[0]) if self.latency_s else 0


@dataclass(frozen=True)
class Allocation:
    """A plan: per batch (deadline order) a gamma index, or None for "not executed"."""

    gamma_indices: tuple[int | None, ...]
    expected_utility: float
    finish_s: float
    repaired_batches: int = 0  # executions a solver planned but that missed a deadline

    def first_executed(self) -> int | None:
        """Position of the first batch the plan executes, if any."""
        return next((i for i, g in enumerate(self.gamma_indices) if g is not None), None)


def evaluate(problem: AllocationProblem, gamma_indices: tuple[int | None, ...]) -> Allocation:
    """Replay a plan from `now_s`; an execution that would miss its deadline becomes "not
    executed" and is counted in `repaired_batches`."""
    clock = problem.now_s
    total = 0.0
    repaired = 0
    kept: list[int | None] = []
    for b, g in enumerate(gamma_indices):
        if g is not None and clock + problem.latency_s[b][g] < problem.deadlines_s[b]:
            clock += problem.latency_s[b][g]
            total += problem.utility[b][g]
            kept.append(g)
        else:
            repaired += g is not None
            kept.append(None)
    return Allocation(tuple(kept), total, clock, repaired)


def allocate_alg2(problem: AllocationProblem) -> Allocation:
    """Algorithm 2 as printed (dp / S / C / J arrays, column 0 = "not executed").

    One deviation: S starts at 0 ("not executed") rather than 1, because with 1 a row whose
    "not executed" cell is never improved backtracks into an infeasible execution of the
    previous batch. The backtracked plan is replayed by `evaluate` as a safety net.
    """
    n, g = problem.num_batches, problem.num_gammas
    if n == 0:
        return Allocation((), 0.0, problem.now_s)
    dp_prev = [0.0] * (g + 1)
    c_prev = [problem.now_s] * (g + 1)
    back: list[list[int]] = []
    cols = range(g + 1)
    for b in range(n):
        deadline = problem.deadlines_s[b]
        lat_row, util_row = problem.latency_s[b], problem.utility[b]
        dp_cur = [0.0] * (g + 1)
        c_cur = [problem.now_s] * (g + 1)
        s_cur = [0] * (g + 1)
        for lp in cols:  # l_b == 0: batch b is not executed
            if dp_prev[lp] > dp_cur[0]:
                dp_cur[0], s_cur[0], c_cur[0] = dp_prev[lp], lp, c_prev[lp]
        for lb in range(1, g + 1):
            t, u_b = lat_row[lb - 1], util_row[lb - 1]
            feasible = False
            for lp in cols:
                v = dp_prev[lp]
                if v == NEG_INF or not c_prev[lp] + t < deadline:
                    continue
                feasible = True
                if v + u_b > dp_cur[lb]:
                    dp_cur[lb], s_cur[lb], c_cur[lb] = v + u_b, lp, c_prev[lp] + t
            if not feasible:
                dp_cur[lb], c_cur[lb] = NEG_INF, math.inf
        back.append(s_cur)
        dp_prev, c_prev = dp_cur, c_cur
    cols_by_value = max(cols, key=lambda col: dp_prev[col])
    choice = [0] * n
    choice[n - 1] = cols_by_value
    for b in range(n - 2, -1, -1):
        choice[b] = back[b + 1][choice[b + 1]]
    return evaluate(problem, tuple(c - 1 if c else None for c in choice))


def _suffix_upper_bounds(problem: AllocationProblem) -> list[float]:
    """ub[b] = most utility batches b.. could add (each at its best feasible-alone gamma)."""
    ub = [0.0] * (problem.num_batches + 1)
    for b in range(problem.num_batches - 1, -1, -1):
        best = 0.0
        for lat, util in zip(problem.latency_s[b], problem.utility[b], strict=True):
            if problem.now_s + lat < problem.deadlines_s[b]:
                best = max(best, util)
        ub[b] = ub[b + 1] + best
    return ub


def allocate_exact(problem: AllocationProblem) -> Allocation:
    """Exact optimum: dynamic program over Pareto fronts of (clock, utility) labels.

    A label is a feasible partial plan of batches 0..b. A label is kept only if no other has an
    earlier-or-equal clock and at-least-equal utility, and if its utility plus the upper bound
    of what the remaining batches can add reaches the best utility seen (branch and bound).
    """
    n = problem.num_batches
    if n == 0:
        return Allocation((), 0.0, problem.now_s)
    ub = _suffix_upper_bounds(problem)
    clocks, utils = [problem.now_s], [0.0]
    parents: list[list[int]] = []
    gammas: list[list[int | None]] = []
    incumbent = 0.0
    for b in range(n):
        deadline, options = problem.deadlines_s[b], _options(problem, b)
        cands: list[tuple[float, float, int, int | None]] = []
        for i, (c, u) in enumerate(zip(clocks, utils, strict=True)):
            if u + ub[b] < incumbent:
                continue
            cands.append((c, u, i, None))
            for gi, t, du in options:
                if c + t < deadline:
                    cands.append((c + t, u + du, i, gi))
        cands.sort(key=lambda x: (x[0], -x[1]))
        best_u = NEG_INF
        clocks, utils, par, gam = [], [], [], []
        for c, u, i, gi in cands:
            if u > best_u:
                best_u = u
                clocks.append(c)
                utils.append(u)
                par.append(i)
                gam.append(gi)
        incumbent = max(incumbent, best_u)
        parents.append(par)
        gammas.append(gam)
    best = max(range(len(utils)), key=lambda k: utils[k])
    plan: list[int | None] = [None] * n
    for b in range(n - 1, -1, -1):
        plan[b] = gammas[b][best]
        best = parents[b][best]
    return evaluate(problem, tuple(plan))


def _options(problem: AllocationProblem, b: int) -> list[tuple[int, float, float]]:
    """(gamma index, latency, utility) of batch b, dropping gammas dominated by another that is
    no slower and no less useful (they can never be needed for optimality)."""
    pairs = sorted(enumerate(zip(problem.latency_s[b], problem.utility[b], strict=True)),
                   key=lambda x: (x[1][0], -x[1][1]))
    kept: list[tuple[int, float, float]] = []
    best_u = NEG_INF
    for gi, (lat, util) in pairs:
        if util > best_u and util > 0:
            kept.append((gi, lat, util))
            best_u = util
    return kept


def allocate_exhaustive(problem: AllocationProblem) -> Allocation:
    """Reference optimum by enumerating all (num_gammas + 1) ** num_batches plans."""
    choices: list[int | None] = [None, *range(problem.num_gammas)]
    best = Allocation((None,) * problem.num_batches, 0.0, problem.now_s)
    for plan in itertools.product(choices, repeat=problem.num_batches):
        result = evaluate(problem, plan)
        if result.repaired_batches == 0 and result.expected_utility > best.expected_utility:
            best = result
    return best
