"""Greedy re-plan of a long queue on packed arrays: a Lagrangian threshold on the jobs'
convex-hull upgrade steps, then a backward fill (see `policies/modality/replan.py`).

The threshold is the lowest accuracy-per-second price (a step ratio) at which the queue still
meets every deadline when each job takes all its steps of ratio >= the price. Feasibility is
monotone in the price (a lower price only adds steps of non-negative latency, and rounded
sums are monotone), so the answer follows the first infeasible step ratio, high to low. The
search checks PROBES ratios per vectorized pass: the top ones first (on long queues the
answer is among them), then evenly spaced ones over the interval still open. A check reads
each job's latency after c steps from `PackedSets.step_latency_s`, which holds the float a
per-price check (fastest + masked step-row sum) forms, and sums the queue left to right as
that check does: the result is the per-price bisection's, bit for bit. `_bisect_steps` is
that bisection, kept for candidate sets that are not `CandidateSet.regular`.
"""

from __future__ import annotations

import bisect

import numpy as np

from policies.modality.candidates import (
    DEADLINE_EPS_S,
    BoolArray,
    FloatArray,
    IntArray,
    PackedSets,
)

PROBES = 16  # step ratios checked per vectorized pass
SMALL_REACH = 4  # up to this many hull steps ahead, counted column by column


def greedy_choices(start_s: float, deadlines_s: FloatArray, ids: IntArray,
                   packed: PackedSets) -> list[int]:
    """Candidate index per job (queue order) for the jobs with candidate sets `ids` (rows of
    `packed`). Precondition: every job on its fastest candidate meets its deadline."""
    width = int(packed.hull_width[ids].max()) if len(ids) else 0
    steps: IntArray = np.zeros(len(ids), dtype=np.int64)
    if width:
        budget = deadlines_s - start_s + DEADLINE_EPS_S
        if packed.regular:
            steps = _search_steps(packed.ratios[ids], packed.step_latency_s[width, ids], budget)
        else:
            ratios = np.ascontiguousarray(packed.ratios[ids, :width])
            deltas = np.ascontiguousarray(packed.deltas_s[ids, :width])
            steps = _bisect_steps(ratios, deltas, packed.fastest_s[ids], budget)
    return backward_fill(start_s, deadlines_s, ids, packed.hull[ids, steps], packed)


def _search_steps(ratios: FloatArray, step_latency_s: FloatArray, budget: FloatArray) -> IntArray:
    """Hull steps per job at the lowest feasible price (0 everywhere if none is); rows of
    `ratios` are non-increasing and end with -inf, `step_latency_s[i, c]` is job i's latency
    after c steps. The probes are step ratios, high to low (a value that repeats repeats a
    probe, which changes nothing): first the top ones, then evenly spaced ones over the
    interval still open, then all of it once it is short."""
    values = np.sort(ratios.ravel())
    values = values[values.searchsorted(-np.inf, side="right"):][::-1]  # finite, high first
    row = step_latency_s.shape[1]
    cells, table = np.arange(0, len(ratios) * row, row), step_latency_s.ravel()
    last: IntArray = np.zeros(len(ratios), dtype=np.int64)  # steps at values[lo - 1]
    lo, hi = 0, len(values)  # values[:lo] feasible; values[hi] infeasible (or hi = end)
    at = np.arange(min(PROBES, hi))
    while lo < hi:
        probes = values[at]
        taken = _steps_taken(ratios, probes)
        ends = table[taken + cells].cumsum(axis=1)  # [probe, job]: when each job ends
        ok: BoolArray = np.logical_and.reduce(ends <= budget, axis=1)
        first = int(ok.argmin())
        first = len(at) if ok[first] else first  # all feasible
        if first:
            lo, last = int(at[first - 1]) + 1, taken[first - 1]
        if first < len(at):
            hi = int(at[first])
        if hi - lo <= PROBES:
            at = np.arange(lo, hi)
        else:
            at = lo + (np.arange(1, PROBES + 1) * (hi - lo)) // (PROBES + 1)
    return last


def _steps_taken(ratios: FloatArray, probes: FloatArray) -> IntArray:
    """[probe, job] = steps of ratio >= probe (rows non-increasing, ending with -inf)."""
    reach = 1  # columns holding a step >= the lowest probe (on long queues usually 1)
    while reach <= SMALL_REACH and ratios[:, reach].max() >= probes[-1]:
        reach += 1
    if reach <= SMALL_REACH:  # a few 2-D compares beat one 3-D pass
        taken: IntArray = (ratios[:, 0] >= probes[:, None]).astype(np.int64)
        for column in range(1, reach):
            taken += ratios[:, column] >= probes[:, None]
        return taken
    cells = ratios.ravel() >= probes[:, None]  # first cell below each probe, per row
    first_below: IntArray = cells.reshape(len(probes), *ratios.shape).argmin(axis=2)
    return first_below


def _bisect_steps(ratios: FloatArray, deltas: FloatArray, base: FloatArray,
                  budget: FloatArray) -> IntArray:
    """The per-price check and bisection the search reproduces, assuming nothing of the
    steps (for candidate sets that are not `CandidateSet.regular`)."""
    prices = np.unique(ratios[np.isfinite(ratios)])[::-1]

    def feasible(price: float) -> bool:
        lat = base + (deltas * (ratios >= price)).sum(axis=1)
        return bool((np.cumsum(lat) <= budget).all())

    lo, hi = 0, len(prices)  # prices[:lo] known feasible; answer = largest feasible count
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if feasible(float(prices[mid - 1])):
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return np.zeros(len(base), dtype=np.int64)
    counts: IntArray = (ratios >= prices[lo - 1]).sum(axis=1)
    return counts


def backward_fill(start_s: float, deadlines_s: FloatArray, ids: IntArray, choices: IntArray,
                  packed: PackedSets) -> list[int]:
    """Raise each job, last first, to its most accurate candidate that fits the headroom
    min over k >= job of (deadline_k - finish_k); O(n log c), feasibility preserved.
    A job is looked at only when its next candidate fits (with ascending latencies, else
    whenever it has a next one), so on long queues most jobs cost a comparison."""
    current_s = packed.latencies_s[ids, choices]
    if packed.regular:
        following = packed.latencies_s[ids, choices + 1]  # +inf past the last candidate
    else:
        following = np.where(choices + 1 < packed.num_candidates[ids], -np.inf, np.inf)
    finish = np.cumsum(np.concatenate(([start_s], current_s)))[1:]
    slack = ((deadlines_s + DEADLINE_EPS_S) - finish).tolist()
    out: list[int] = choices.tolist()
    now_s, next_s = current_s.tolist(), following.tolist()
    sets, set_ids = packed.sets, ids.tolist()
    headroom_after = float("inf")
    for k in range(len(out) - 1, -1, -1):
        headroom = slack[k]
        if headroom_after < headroom:  # min(slack, after), as min() picks
            headroom = headroom_after
        current = now_s[k]
        fits = current + (0.0 if headroom < 0.0 else headroom)  # max(headroom, 0.0)
        if next_s[k] <= fits:
            lats = sets[set_ids[k]].latencies_s
            best = bisect.bisect_right(lats, fits) - 1
            if best > out[k]:
                headroom -= lats[best] - current
                out[k] = best
        headroom_after = headroom
    return out
