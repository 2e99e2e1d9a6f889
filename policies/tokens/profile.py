"""The view of a `Profile` that token adaptation needs: gammas, batch latency, task accuracy.

Each profile variant is one (task, gamma): `Variant.gamma` is the token change per layer and
`Variant.model` names the task (the task head the query is answered by). A profile with a single
model serves every task with it. Latency of a batch mixing tasks is the size-weighted mean of the
tasks' batch latencies at the full batch size (the paper sums per-task sample latencies; with
one shared backbone, as in our profiles, the two agree).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from policies.profile import Profile, dense_latency_ms

T = TypeVar("T")


@dataclass(frozen=True)
class TokenProfile:
    """Dense per-(task, gamma) tables. `gammas` ascend; index i everywhere means gammas[i]."""

    gammas: tuple[int, ...]
    tasks: tuple[str, ...]
    accuracy: Mapping[str, tuple[float, ...]]
    latency_s: Mapping[str, tuple[tuple[float, ...], ...]]  # [task][gamma index][batch - 1]
    max_batch_size: int

    @classmethod
    def from_profile(cls, profile: Profile, percentile: str = "p95",
                     max_batch_size: int | None = None) -> TokenProfile:
        gammas = tuple(sorted({v.variant.gamma for v in profile.variants}))
        tasks = tuple(sorted({v.variant.model or v.variant.name for v in profile.variants}))
        if max_batch_size is None:
            max_batch_size = max(p.batch_size for v in profile.variants for p in v.latency)
        acc: dict[str, list[float | None]] = {t: [None] * len(gammas) for t in tasks}
        lat: dict[str, list[tuple[float, ...] | None]] = {t: [None] * len(gammas) for t in tasks}
        for vp in profile.variants:
            task, gi = vp.variant.model or vp.variant.name, gammas.index(vp.variant.gamma)
            if acc[task][gi] is not None:
                raise ValueError(f"profile {profile.name}: two variants for task {task!r} "
                                 f"gamma {vp.variant.gamma}")
            acc[task][gi] = vp.accuracy
            lat[task][gi] = tuple(ms / 1000.0 for ms in
                                  dense_latency_ms(vp.latency, percentile, max_batch_size))
        return cls(gammas, tasks, {t: _complete(acc[t], t, gammas) for t in tasks},
                   {t: _complete(lat[t], t, gammas) for t in tasks}, max_batch_size)

    def gamma_index(self, gamma: int) -> int:
        try:
            return self.gammas.index(gamma)
        except ValueError:
            raise ValueError(f"gamma {gamma} not profiled; valid: {list(self.gammas)}") from None

    def task_key(self, task: str) -> str:
        if task in self.accuracy:
            return task
        if len(self.tasks) == 1:
            return self.tasks[0]
        raise ValueError(f"task {task!r} not profiled; valid: {list(self.tasks)}")

    def task_accuracy(self, task: str, gamma_index: int) -> float:
        return self.accuracy[self.task_key(task)][gamma_index]

    def batch_latency_s(self, task_counts: Mapping[str, int], gamma_index: int) -> float:
        """Seconds to run a batch with `task_counts` queries per task at gammas[gamma_index]."""
        size = sum(task_counts.values())
        if size < 1:
            raise ValueError("batch must hold at least one query")
        total = 0.0
        for task, count in task_counts.items():
            total += count * self._latency(self.latency_s[self.task_key(task)][gamma_index], size)
        return total / size

    def expected_utility(self, task_utility: Mapping[str, float], gamma_index: int) -> float:
        """Sum over queries of accuracy x utility (the paper's U-hat_b)."""
        return sum(self.accuracy[self.task_key(t)][gamma_index] * u
                   for t, u in task_utility.items())

    @staticmethod
    def _latency(table: tuple[float, ...], size: int) -> float:
        if size <= len(table):
            return table[size - 1]
        step = max(table[-1] - table[-2], 0.0) if len(table) > 1 else table[-1]
        return table[-1] + step * (size - len(table))


def _complete(row: list[T | None], task: str, gammas: tuple[int, ...]) -> tuple[T, ...]:
    missing = [g for g, v in zip(gammas, row, strict=True) if v is None]
    if missing:
        raise ValueError(f"task {task!r} lacks gammas {missing}; every task needs every gamma")
    return tuple(v for v in row if v is not None)
