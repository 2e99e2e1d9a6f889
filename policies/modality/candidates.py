"""Candidate strategies of a queued job, one by one (`CandidateSet`) and packed into arrays
(`PackedSets`) so the re-planner reads a whole queue with one fancy index per quantity
instead of one Python attribute chain per job (docs/mosel.md, decision cost)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policies.modality.matrix import Strategy

DEADLINE_EPS_S = 1e-9
SMALL_QUEUE = 16  # up to this many jobs, plain Python beats numpy's per-call cost

BoolArray = npt.NDArray[np.bool_]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class CandidateSet:
    """Pareto candidates of one (job size, accuracy level) and their upper concave hull in
    (latency, accuracy points): `hull` indexes candidates; step i goes hull[i] -> hull[i+1]."""

    candidates: tuple[Strategy, ...]
    latencies_s: tuple[float, ...]
    hull: tuple[int, ...]
    ratios: tuple[float, ...]
    delta_latency_s: tuple[float, ...]

    @classmethod
    def of(cls, candidates: tuple[Strategy, ...]) -> CandidateSet:
        hull: list[int] = []
        for i, s in enumerate(candidates):
            while len(hull) >= 2:
                a, b = candidates[hull[-2]], candidates[hull[-1]]
                left = (b.accuracy_points - a.accuracy_points) * (s.latency_s - b.latency_s)
                right = (s.accuracy_points - b.accuracy_points) * (b.latency_s - a.latency_s)
                if left <= right:  # b lies on or under the chord a -> s
                    hull.pop()
                else:
                    break
            hull.append(i)
        ratios, deltas = [], []
        for lo, hi in zip(hull, hull[1:], strict=False):
            dl = candidates[hi].latency_s - candidates[lo].latency_s
            dv = candidates[hi].accuracy_points - candidates[lo].accuracy_points
            ratios.append(dv / dl if dl > 0 else float("inf"))
            deltas.append(dl)
        return cls(candidates, tuple(s.latency_s for s in candidates), tuple(hull),
                   tuple(ratios), tuple(deltas))

    @property
    def regular(self) -> bool:
        """Latencies ascending, hull ratios finite and non-increasing (a price takes a prefix
        of the steps), no step faster (feasibility is monotone in the price). So for every
        Pareto row; the re-planner's shortcuts rely on it and fall back without it."""
        lats, ratios = self.latencies_s, self.ratios
        return (all(a <= b for a, b in zip(lats, lats[1:], strict=False))
                and all(math.isfinite(r) for r in ratios)
                and all(a >= b for a, b in zip(ratios, ratios[1:], strict=False))
                and all(d >= 0.0 for d in self.delta_latency_s))


@dataclass(frozen=True, eq=False)
class PackedSets:
    """Candidate sets as row-aligned arrays (row = set id). Hull rows are padded to the
    widest set: ratios with -inf (never taken; one more column, so every row ends with one),
    deltas with 0. Empty sets have 0 requests and a fastest latency of 0.0 (they are dropped
    and take no time).

    `latencies_s` has one more +inf column than the most candidates (so "the next candidate"
    always exists). `step_latency_s[w, s, c]` = latency of set s after its first c hull
    steps, formed as a per-price feasibility check over a queue of hull width w forms it:
    fastest latency + numpy's sum of the w-wide step row masked to c steps (a sum's rounding
    depends on the row width, never on the rows around it). Valid for w >= the set's own
    width; one w is one block, so a queue's look-ups stay close together in memory."""

    sets: tuple[CandidateSet, ...]
    num_candidates: IntArray
    num_requests: IntArray
    fastest_s: FloatArray
    top_s: FloatArray
    hull_width: IntArray
    ratios: FloatArray
    deltas_s: FloatArray
    hull: IntArray
    latencies_s: FloatArray
    step_latency_s: FloatArray
    regular: bool

    @classmethod
    def of(cls, sets: Sequence[CandidateSet]) -> PackedSets:
        count = len(sets)
        width = max((len(s.ratios) for s in sets), default=0)
        most = max((len(s.candidates) for s in sets), default=0)
        ratios = np.full((count, width + 1), -np.inf)
        deltas = np.zeros((count, width))
        hull = np.zeros((count, width + 1), dtype=np.int64)
        latencies = np.full((count, most + 1), np.inf)
        for i, s in enumerate(sets):
            m = len(s.ratios)
            ratios[i, :m] = s.ratios
            deltas[i, :m] = s.delta_latency_s
            hull[i, :len(s.hull)] = s.hull
            latencies[i, :len(s.candidates)] = s.latencies_s
        fastest = np.array([s.latencies_s[0] if s.candidates else 0.0 for s in sets])
        return cls(
            sets=tuple(sets),
            num_candidates=np.array([len(s.candidates) for s in sets], dtype=np.int64),
            num_requests=np.array([s.candidates[0].num_requests if s.candidates else 0
                                   for s in sets], dtype=np.int64),
            fastest_s=fastest,
            top_s=np.array([s.latencies_s[-1] if s.candidates else 0.0 for s in sets]),
            hull_width=np.array([len(s.ratios) for s in sets], dtype=np.int64),
            ratios=ratios, deltas_s=deltas, hull=hull, latencies_s=latencies,
            step_latency_s=_step_latencies(fastest, deltas),
            regular=all(s.regular for s in sets))


def _step_latencies(fastest_s: FloatArray, deltas_s: FloatArray) -> FloatArray:
    """[w, set, c]: see `PackedSets.step_latency_s`."""
    count, width = deltas_s.shape
    table = np.zeros((width + 1, count, width + 1))
    for w in range(1, width + 1):
        prefix = np.arange(w)[None, :] < np.arange(w + 1)[:, None]
        masked = (deltas_s[:, None, :w] * prefix[None, :, :]).reshape(-1, w)
        table[w, :, :w + 1] = fastest_s[:, None] + masked.sum(axis=1).reshape(count, w + 1)
    return table
