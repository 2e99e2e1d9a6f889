"""What the MOSEL online stage precomputes from the offline strategy matrix: the candidate
sets per (job size, accuracy level), packed into arrays for the re-planner, and the
modality-agnostic strategy per job size."""

from __future__ import annotations

import numpy as np

from policies.modality.candidates import CandidateSet, FloatArray, IntArray, PackedSets
from policies.modality.matrix import (
    ACCURACY_EPS,
    Strategy,
    best_partitions,
    level_index,
    strategy_from_batches,
)
from policies.modality.solvers import StrategyMatrix
from policies.profile import LatencyModel


class ModalityTables:
    """Everything the online stage precomputes from the offline matrix: candidate sets (with
    hulls) per (job size, level) and the modality-agnostic strategy per job size."""

    def __init__(self, matrix: StrategyMatrix, model: LatencyModel,
                 all_modality_index: int) -> None:
        self.matrix = matrix
        self.model = model
        self.all_modality_index = all_modality_index
        levels = matrix.accuracy_levels
        self._sets = tuple(
            tuple(CandidateSet.of(matrix.candidates(n, a)) for a in levels)
            for n in range(1, matrix.max_job_size + 1))
        _, parts = best_partitions(model, all_modality_index, matrix.max_job_size)
        self._agnostic = tuple(
            strategy_from_batches(model, [(all_modality_index, b) for b in parts[n]])
            for n in range(1, matrix.max_job_size + 1))
        self._empty = CandidateSet.of(())
        # Set id of (job size n, level l) = (n - 1) * levels + l; the empty set comes last.
        self.packed = PackedSets.of([s for row in self._sets for s in row] + [self._empty])
        self._levels = np.array(levels, dtype=np.float64)
        self._levels_sorted = all(a <= b for a, b in zip(levels, levels[1:], strict=False))
        count, top = len(levels), matrix.max_job_size
        ids = np.arange(top * count, dtype=np.int64).reshape(top, count)
        empty = np.full((top, 1), top * count, dtype=np.int64)  # level past the grid
        self._ids = np.vstack([np.zeros((1, count + 1), dtype=np.int64),  # no size 0
                               np.hstack([ids, empty])])

    def set_ids(self, num_requests: IntArray, accuracy_slo: FloatArray) -> IntArray | None:
        """Row of `packed` holding `options(n, a)` per job; None when some job size is outside
        1..max_job_size or the levels are unsorted (callers then use `options`)."""
        if (not self._levels_sorted or not len(num_requests) or num_requests.min() < 1
                or num_requests.max() > self.matrix.max_job_size):
            return None
        level = self._levels.searchsorted(accuracy_slo - ACCURACY_EPS, side="left")
        ids: IntArray = self._ids[num_requests, level]
        return ids

    def set_id(self, num_requests: int, accuracy_slo: float) -> int | None:
        """`set_ids` for one job in plain Python (cheaper than numpy on a few jobs)."""
        if not 1 <= num_requests <= self.matrix.max_job_size:
            return None
        count = len(self._levels)
        level = level_index(self.matrix.accuracy_levels, accuracy_slo)
        return self.matrix.max_job_size * count if level is None else (
            (num_requests - 1) * count + level)

    def options(self, num_requests: int, accuracy_slo: float) -> CandidateSet:
        level = level_index(self.matrix.accuracy_levels, accuracy_slo)
        if level is None:
            return self._empty
        return self._sets[num_requests - 1][level]

    def agnostic(self, num_requests: int) -> Strategy:
        return self._agnostic[num_requests - 1]
