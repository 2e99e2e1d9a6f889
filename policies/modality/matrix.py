"""MOSEL offline stage (section 5.1): strategies per (job size, accuracy SLO), exact solver.

A *strategy* splits a job of n requests into batches, each run on one modality combination
(a profile variant). Its latency is the sum of its batch latencies; its accuracy is the
size-weighted mean of the batches' accuracies. The matrix P[n][level] holds, for each job
size and accuracy level, the strategy of least latency whose accuracy is >= the level, or
`None` where no strategy reaches it (marked, never guessed).

The exact solver needs no accuracy discretization. For each combination k it first solves
the best partition of m requests into batches of k (an unbounded knapsack over batch sizes,
f_k(m)); then a DP over combinations keeps, for every number of requests assigned so far,
the Pareto front of (latency, accuracy points) where accuracy points = sum of acc * size.
A front point is dropped only if another has latency <= and points >= (so no optimum is
ever lost), and the answer for every accuracy level of a job size is read off the final
front. The only tolerance is `ACCURACY_EPS` on the accuracy-sum comparison, shared with
the brute-force oracle in the tests.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policies.profile import LatencyModel

ACCURACY_EPS = 1e-9

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def meets_accuracy(accuracy_points: float, accuracy_slo: float, num_requests: int) -> bool:
    """True when sum(acc * size) reaches accuracy_slo * num_requests (float tolerance only)."""
    return accuracy_points >= accuracy_slo * num_requests - ACCURACY_EPS


@dataclass(frozen=True)
class StrategyBatch:
    """`batch_size` requests of a job run together on combination `variant_index`."""

    variant_index: int
    variant_name: str
    batch_size: int


@dataclass(frozen=True)
class Strategy:
    """How one job runs: its batches in execution order, total latency and accuracy points."""

    batches: tuple[StrategyBatch, ...]
    latency_s: float
    accuracy_points: float

    @property
    def num_requests(self) -> int:
        return sum(b.batch_size for b in self.batches)

    @property
    def accuracy(self) -> float:
        """Size-weighted mean accuracy of the job's requests."""
        return self.accuracy_points / self.num_requests


def strategy_from_batches(model: LatencyModel, sizes: list[tuple[int, int]]) -> Strategy:
    """Build a Strategy from (variant index, batch size) pairs, computing its cost from `model`."""
    batches = tuple(StrategyBatch(k, model.names[k], b) for k, b in sizes)
    latency = sum(model.latency(k, b) for k, b in sizes)
    points = sum(model.accuracy[k] * b for k, b in sizes)
    return Strategy(batches, latency, points)


def best_partitions(model: LatencyModel, variant_index: int,
                    max_requests: int) -> tuple[list[float], list[list[int]]]:
    """f(m) = least latency to run m requests on one combination as batches of size <=
    max_batch_size, and the batch sizes achieving it, for m = 0..max_requests (exact)."""
    max_batch = model.max_batch_size
    cost = [0.0] + [float("inf")] * max_requests
    last = [0] * (max_requests + 1)
    for m in range(1, max_requests + 1):
        for b in range(1, min(m, max_batch) + 1):
            c = cost[m - b] + model.latency(variant_index, b)
            if c < cost[m] - 1e-15:
                cost[m], last[m] = c, b
    parts: list[list[int]] = [[]]
    for m in range(1, max_requests + 1):
        parts.append(sorted([*parts[m - last[m]], last[m]], reverse=True))
    return cost, parts


@dataclass(frozen=True)
class _Front:
    """Pareto front at one DP stage: latency ascending, points strictly ascending."""

    latency: FloatArray
    points: FloatArray
    take: IntArray
    parent: IntArray


def _pareto(latency: FloatArray, points: FloatArray, take: IntArray, parent: IntArray) -> _Front:
    order = np.lexsort((-points, latency))
    pts = points[order]
    prev_best = np.maximum.accumulate(np.concatenate(([-np.inf], pts[:-1])))
    keep = pts > prev_best + 1e-12
    sel = order[keep]
    return _Front(latency[sel], points[sel], take[sel], parent[sel])


def _combine(prev: list[_Front], cost: list[float], acc: float, m: int) -> _Front:
    lats, pts, takes, parents = [], [], [], []
    for j in range(m + 1):
        f = prev[m - j]
        if f.latency.size == 0 or cost[j] == float("inf"):
            continue
        lats.append(f.latency + cost[j])
        pts.append(f.points + acc * j)
        takes.append(np.full(f.latency.size, j, dtype=np.int64))
        parents.append(np.arange(f.latency.size, dtype=np.int64))
    return _pareto(np.concatenate(lats), np.concatenate(pts), np.concatenate(takes),
                   np.concatenate(parents))


@dataclass(frozen=True)
class StrategyFrontier:
    """For each job size 1..max_job_size, every Pareto-optimal strategy (latency, accuracy)."""

    model: LatencyModel
    max_job_size: int
    fronts: tuple[tuple[_Front, ...], ...]
    partitions: tuple[tuple[tuple[int, ...], ...], ...]

    def front_size(self, job_size: int) -> int:
        return int(self.fronts[-1][job_size].latency.size)

    def strategy_at(self, job_size: int, index: int) -> Strategy:
        sizes: list[tuple[int, int]] = []
        m, idx = job_size, index
        for k in range(len(self.fronts) - 1, -1, -1):
            f = self.fronts[k][m]
            j = int(f.take[idx])
            sizes.extend((k, b) for b in self.partitions[k][j])
            idx, m = int(f.parent[idx]), m - j
        # Most accurate batches first: a job's early answers carry its best accuracy.
        sizes.sort(key=lambda kb: (-self.model.accuracy[kb[0]], -kb[1]))
        return strategy_from_batches(self.model, sizes)

    def fastest_meeting(self, job_size: int, accuracy_slo: float) -> Strategy | None:
        """Least-latency strategy with accuracy >= accuracy_slo, or None when none exists."""
        f = self.fronts[-1][job_size]
        target = accuracy_slo * job_size - ACCURACY_EPS
        idx = int(np.searchsorted(f.points, target, side="left"))
        if idx >= f.points.size:
            return None
        return self.strategy_at(job_size, idx)


def build_frontier(model: LatencyModel, max_job_size: int) -> StrategyFrontier:
    """Exact Pareto fronts for all job sizes 1..max_job_size at once."""
    if max_job_size < 1:
        raise ValueError(f"max_job_size must be >= 1, got {max_job_size}")
    empty_i = np.zeros(0, dtype=np.int64)
    zero = _Front(np.zeros(1), np.zeros(1), np.zeros(1, dtype=np.int64),
                  np.zeros(1, dtype=np.int64))
    empty = _Front(np.zeros(0), np.zeros(0), empty_i, empty_i)
    prev = [zero] + [empty] * max_job_size
    fronts: list[tuple[_Front, ...]] = []
    partitions: list[tuple[tuple[int, ...], ...]] = []
    for k in range(len(model.names)):
        cost, parts = best_partitions(model, k, max_job_size)
        partitions.append(tuple(tuple(p) for p in parts))
        stage = [_combine(prev, cost, model.accuracy[k], m) for m in range(max_job_size + 1)]
        fronts.append(tuple(stage))
        prev = stage
    return StrategyFrontier(model, max_job_size, tuple(fronts), tuple(partitions))


def accuracy_grid(model: LatencyModel, num_levels: int) -> tuple[float, ...]:
    """`num_levels` accuracy SLOs evenly spaced from the lowest to the highest combination, and
    every combination's own accuracy: a job's floor is rounded up to the next level, so without
    them a floor a cheap combination just meets (0.60 against audio's 0.606) would round past it
    (to 0.615) and leave only the dear ones."""
    if num_levels < 1:
        raise ValueError(f"num_levels must be >= 1, got {num_levels}")
    lo, hi = min(model.accuracy), max(model.accuracy)
    if num_levels == 1:
        return (hi,)
    even = [lo + (hi - lo) * i / (num_levels - 1) for i in range(num_levels)]
    levels: list[float] = []
    for level in sorted([*even, *model.accuracy]):
        if not levels or level - levels[-1] > ACCURACY_EPS:
            levels.append(level)
    return tuple(levels)


def level_index(levels: tuple[float, ...], accuracy_slo: float) -> int | None:
    """Index of the lowest grid level >= accuracy_slo (conservative), None above the grid."""
    idx = bisect.bisect_left(levels, accuracy_slo - ACCURACY_EPS)
    return idx if idx < len(levels) else None
