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
_BEAM = 24  # labels per stage of the beam search that seeds the exact bound


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


@dataclass(frozen=True)
class _StageBound:
    """Upper bound on the utility batches b.. can still add to a label whose clock is c: the
    sum over those batches of the best utility among gammas still feasible alone from c
    (c + latency < deadline). A step function of c, stored as ascending thresholds."""

    thresholds: npt.NDArray[np.float64]
    suffix_sums: npt.NDArray[np.float64]
    cum_time_s: npt.NDArray[np.float64]  # fractional-knapsack prefix sums, densest first
    cum_utility: npt.NDArray[np.float64]
    densities: npt.NDArray[np.float64]
    horizon_s: float  # latest remaining deadline: nothing useful runs past it

    def __call__(self, clocks: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        step = self.suffix_sums[np.searchsorted(self.thresholds, clocks, side="right")]
        room = np.maximum(self.horizon_s - clocks, 0.0)
        if self.densities.size == 0:
            return np.zeros_like(clocks)
        i = np.searchsorted(self.cum_time_s, room, side="right")  # items that fit whole
        part = np.where(i < self.densities.size,
                        self.densities[np.minimum(i, self.densities.size - 1)]
                        * (room - np.concatenate(([0.0], self.cum_time_s))[i]), 0.0)
        knap = np.concatenate(([0.0], self.cum_utility))[i] + part
        bound: npt.NDArray[np.float64] = np.minimum(step, knap)
        return bound


def _stage_bounds(problem: AllocationProblem) -> list[_StageBound]:
    """Per stage: the feasible-alone step bound, and a fractional knapsack over the time left
    until the last deadline (batch k yields at most min(U_k, rho_k x time), U_k its best
    utility and rho_k its best utility per second; latencies must be positive)."""
    taus: list[float] = []
    deltas: list[float] = []
    starts: list[int] = []
    best_u = np.zeros(problem.num_batches)
    rho = np.zeros(problem.num_batches)
    for b in range(problem.num_batches):
        starts.append(len(taus))
        previous = 0.0
        for _, lat, util in _options(problem, b):  # latency and utility both ascend
            taus.append(problem.deadlines_s[b] - lat)
            deltas.append(util - previous)
            previous = util
            rho[b] = max(rho[b], util / max(lat, 1e-12))
        best_u[b] = previous
    tau_all, delta_all = np.array(taus), np.array(deltas)
    bounds = []
    for b, start in enumerate(starts):
        order = np.argsort(tau_all[start:], kind="stable")
        tail = np.concatenate((np.cumsum(delta_all[start:][order][::-1])[::-1], [0.0]))
        items = b + np.argsort(-rho[b:], kind="stable")
        items = items[best_u[items] > 0]
        bounds.append(_StageBound(tau_all[start:][order], tail,
                                  np.cumsum(best_u[items] / rho[items]),
                                  np.cumsum(best_u[items]), rho[items], problem.deadlines_s[-1]))
    return bounds


def allocate_exact(problem: AllocationProblem) -> Allocation:
    """Exact optimum: dynamic program over Pareto fronts of (clock, utility) labels.

    A label is a feasible partial plan of batches 0..b. A label is kept only if no other has an
    earlier-or-equal clock and at-least-equal utility, and if its utility plus an upper bound on
    what the remaining batches can add reaches the best complete plan known (branch and bound).
    The bound starts from the better of Algorithm 2 and a beam search (the same program with at
    most `_BEAM` labels per stage). Fronts are numpy arrays; the search is exact.
    """
    if problem.num_batches == 0:
        return Allocation((), 0.0, problem.now_s)
    bounds = _stage_bounds(problem)
    seed = max(allocate_alg2(problem), _pareto(problem, bounds, 0.0, _BEAM),
               key=lambda a: a.expected_utility)
    best = _pareto(problem, bounds, seed.expected_utility, None)
    return best if best.expected_utility > seed.expected_utility else seed


def _pareto(problem: AllocationProblem, bounds: list[_StageBound], lower_bound: float,
            max_labels: int | None) -> Allocation:
    slack = 1e-9 * max(1.0, abs(lower_bound))
    incumbent = lower_bound - slack
    clocks, utils = np.array([problem.now_s]), np.array([0.0])
    parents: list[npt.NDArray[np.int64]] = []
    gammas: list[npt.NDArray[np.int64]] = []
    for b in range(problem.num_batches):
        optimistic = utils + bounds[b](clocks)
        alive = np.flatnonzero(optimistic >= incumbent)
        if max_labels is not None and alive.size > max_labels:  # beam: most promising labels
            top = np.argpartition(-optimistic[alive], max_labels)[:max_labels]
            alive = np.sort(alive[top])
        opt_g, opt_t, opt_u = _option_arrays(problem, b)
        ca, ua = clocks[alive], utils[alive]
        sel = np.flatnonzero((ca[None, :] + opt_t[:, None] < problem.deadlines_s[b]).ravel())
        opt, col = sel // max(alive.size, 1), sel % max(alive.size, 1)
        cc = np.concatenate((ca, ca[col] + opt_t[opt]))
        cu = np.concatenate((ua, ua[col] + opt_u[opt]))
        if cc.size == 0:
            return Allocation((None,) * problem.num_batches, 0.0, problem.now_s)
        order = np.lexsort((-cu, cc))
        cu_sorted = cu[order]
        prev_best = np.maximum.accumulate(np.concatenate(([-np.inf], cu_sorted[:-1])))
        keep = order[cu_sorted > prev_best]
        clocks, utils = cc[keep], cu[keep]
        parents.append(np.concatenate((alive, alive[col]))[keep])
        gammas.append(np.concatenate((np.full(alive.size, _SKIP), opt_g[opt]))[keep])
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
