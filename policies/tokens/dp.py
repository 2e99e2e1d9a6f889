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

import numpy as np
import numpy.typing as npt

NEG_INF = -math.inf
_SKIP = -1  # internal marker for "not executed" inside numpy arrays


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


_GRID_BINS = 512  # time bins of the relaxed dynamic programs that bound the exact search
_EPS = 1e-9


@dataclass(frozen=True)
class _Grid:
    """Time grid from now_s to the last deadline: bin j starts at now_s + j * step_s."""

    now_s: float
    step_s: float
    bins: int

    def bin_floor(self, clocks: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        """Largest j with now_s + j * step_s <= clock (never too large), capped at `bins`."""
        j = ((clocks - self.now_s) / self.step_s - _EPS).astype(np.int64)  # clocks >= now_s
        out: npt.NDArray[np.int64] = np.minimum(np.maximum(j, 0), self.bins)
        return out


def _grid(problem: AllocationProblem, bins: int) -> _Grid:
    span = max(problem.deadlines_s[-1] - problem.now_s, _EPS)
    return _Grid(problem.now_s, span / bins, bins)


def _upper_bounds(problem: AllocationProblem, grid: _Grid,
                  options: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64],
                                      npt.NDArray[np.float64]]]) -> npt.NDArray[np.float64]:
    """ub[b][j] >= the most utility batches b.. can add to any label whose clock lies in bin j.

    A backward dynamic program on the grid, optimistic twice: a batch starting in bin j is
    feasible if it would be from the bin's start, and a latency t advances the clock by
    floor(t / step) bins only. By induction ub[b] is non-increasing in j and dominates the true
    optimum of every clock in the bin. Column `bins` (past the last deadline) is 0."""
    n, width = problem.num_batches, grid.bins + 1
    starts = grid.now_s + grid.step_s * np.arange(width)
    ub = np.zeros((n + 1, width))
    padded = np.zeros(2 * width)  # ub[b + 1] followed by zeros: shifts past the end read 0
    for b in range(n - 1, -1, -1):
        _, lat, util = options[b]
        padded[:width] = ub[b + 1]
        row = ub[b]
        row[:] = ub[b + 1]
        shifts = np.minimum(np.floor(lat / grid.step_s * (1.0 - _EPS)), width).astype(np.int64)
        ends = np.searchsorted(starts, problem.deadlines_s[b] + _EPS - lat, side="left")
        for k, end, u in zip(shifts.tolist(), ends.tolist(), util.tolist(), strict=True):
            if end:  # bins 0..end-1 can still start this option in time
                np.maximum(row[:end], padded[k:k + end] + u, out=row[:end])
    return ub


def _rollout(problem: AllocationProblem, grid: _Grid, upper: npt.NDArray[np.float64],
             options: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64],
                                 npt.NDArray[np.float64]]]) -> Allocation:
    """A feasible plan guided by the upper bounds: batch by batch, from the true clock, the
    option (or skip) maximizing utility now plus the bound of what follows."""
    def bin_of(clock: float) -> int:
        return min(max(int((clock - grid.now_s) / grid.step_s - _EPS), 0), grid.bins)

    clock, plan = problem.now_s, list[int | None]()
    for b in range(problem.num_batches):
        bound = upper[b + 1].tolist()
        best, choice, end = bound[bin_of(clock)], None, clock
        for g, t, u in zip(*(o.tolist() for o in options[b]), strict=True):
            if clock + t < problem.deadlines_s[b] and u + bound[bin_of(clock + t)] > best:
                best, choice, end = u + bound[bin_of(clock + t)], g, clock + t
        plan.append(choice)
        clock = end
    return evaluate(problem, tuple(plan))


def allocate_exact(problem: AllocationProblem, bins: int = _GRID_BINS) -> Allocation:
    """Exact optimum: dynamic program over Pareto fronts of (clock, utility) labels.

    A label is a feasible partial plan of batches 0..b. A label is kept only if no other has an
    earlier-or-equal clock and at-least-equal utility, and if its utility plus an upper bound on
    what the remaining batches can add reaches the best complete plan known (branch and bound).
    The upper bound per stage and clock comes from a dynamic program on a time grid of `bins`
    bins rounded in the plan's favour; the first incumbent is the better of Algorithm 2 and a
    rollout guided by that bound. Rounding only loosens the bound; the search itself is exact.
    """
    if problem.num_batches == 0:
        return Allocation((), 0.0, problem.now_s)
    options = [_option_arrays(problem, b) for b in range(problem.num_batches)]
    grid = _grid(problem, bins)
    upper = _upper_bounds(problem, grid, options)
    seed = max(allocate_alg2(problem), _rollout(problem, grid, upper, options),
               key=lambda a: a.expected_utility)
    best = _pareto(problem, options, grid, upper, seed.expected_utility)
    return best if best.expected_utility > seed.expected_utility else seed


def _pareto(problem: AllocationProblem,
            options: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.float64],
                                npt.NDArray[np.float64]]],
            grid: _Grid, upper: npt.NDArray[np.float64], lower_bound: float) -> Allocation:
    slack = 1e-9 * max(1.0, abs(lower_bound))
    incumbent = lower_bound - slack
    clocks, utils = np.array([problem.now_s]), np.array([0.0])
    parents: list[npt.NDArray[np.int64]] = []
    gammas: list[npt.NDArray[np.int64]] = []
    for b in range(problem.num_batches):
        alive = np.flatnonzero(utils + upper[b][grid.bin_floor(clocks)] >= incumbent)
        opt_g, opt_t, opt_u = options[b]
        ca, ua = clocks[alive], utils[alive]
        # Clocks ascend, so the labels that can run option k are a prefix of length counts[k].
        counts = np.concatenate(([ca.size], np.searchsorted(ca, problem.deadlines_s[b] - opt_t,
                                                            side="left")))
        total = int(counts.sum())
        if total == 0:
            return Allocation((None,) * problem.num_batches, 0.0, problem.now_s)
        which = np.repeat(np.arange(counts.size), counts)  # 0 = skip, k + 1 = option k
        col = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        add_t = np.concatenate(([0.0], opt_t))[which]
        cc = ca[col] + add_t
        cu = ua[col] + np.concatenate(([0.0], opt_u))[which]
        order = np.argsort(cc, kind="stable")  # sorted runs: timsort merges them
        cu_sorted = cu[order]
        prev_best = np.maximum.accumulate(np.concatenate(([-np.inf], cu_sorted[:-1])))
        keep = order[cu_sorted > prev_best]
        clocks, utils = cc[keep], cu[keep]
        parents.append(alive[col[keep]])
        gammas.append(np.concatenate(([_SKIP], opt_g))[which[keep]])
        incumbent = max(incumbent, float(utils.max()) - slack)
    best = int(np.argmax(utils))
    plan: list[int | None] = [None] * problem.num_batches
    for b in range(problem.num_batches - 1, -1, -1):
        g = int(gammas[b][best])
        plan[b] = None if g == _SKIP else g
        best = int(parents[b][best])
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


def _option_arrays(problem: AllocationProblem, b: int) -> tuple[
        npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    options = _options(problem, b)
    return (np.array([o[0] for o in options], dtype=np.int64),
            np.array([o[1] for o in options], dtype=np.float64),
            np.array([o[2] for o in options], dtype=np.float64))


def allocate_exhaustive(problem: AllocationProblem) -> Allocation:
    """Reference optimum by enumerating all (num_gammas + 1) ** num_batches plans."""
    choices: list[int | None] = [None, *range(problem.num_gammas)]
    best = Allocation((None,) * problem.num_batches, 0.0, problem.now_s)
    for plan in itertools.product(choices, repeat=problem.num_batches):
        result = evaluate(problem, plan)
        if result.repaired_batches == 0 and result.expected_utility > best.expected_utility:
            best = result
    return best
