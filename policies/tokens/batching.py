"""OTAS Algorithm 1: adding a query to the batch queue (adaptive batching).

A query joins the newest batch that (scanning newest to oldest) opened at most `max_wait_s`
(delta) before it, holds fewer than `max_batch_size` (epsilon) queries, has a deadline within
`max_deadline_gap_s` (eta) of the query's and a first-query utility within `max_utility_gap`
(mu) of the query's utility; otherwise it opens a new batch. The queue is immutable: every
operation returns a new `BatchQueue`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cached_property

from policies.types import Request


@dataclass(frozen=True)
class BatchingParams:
    """Thresholds of Algorithm 1 (paper values: 0.5 s, 64, 0.5 s, 0.8)."""

    max_wait_s: float = 0.5
    max_batch_size: int = 64
    max_deadline_gap_s: float = 0.5
    max_utility_gap: float = 0.8

    def __post_init__(self) -> None:
        if self.max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {self.max_batch_size}")
        if min(self.max_wait_s, self.max_deadline_gap_s, self.max_utility_gap) < 0:
            raise ValueError("batching thresholds must be non-negative")


@dataclass(frozen=True)
class QueuedBatch:
    """A batch waiting in the queue. `requests` are in arrival order."""

    batch_id: int
    requests: tuple[Request, ...]

    def __post_init__(self) -> None:
        if not self.requests:
            raise ValueError(f"batch {self.batch_id} is empty")

    @property
    def size(self) -> int:
        return len(self.requests)

    @cached_property
    def arrival_s(self) -> float:
        """s_b: the earliest arrival among the batch's queries."""
        return min(r.arrival_s for r in self.requests)

    @cached_property
    def deadline_s(self) -> float:
        """d_b: the earliest deadline among the batch's queries."""
        return min(r.deadline_s for r in self.requests)

    @property
    def first_utility(self) -> float:
        """u_b: the utility of the batch's first-arrived query."""
        return self.requests[0].slo.utility

    @cached_property
    def mean_utility(self) -> float:
        """U-bar_b of Algorithm 3."""
        return sum(r.slo.utility for r in self.requests) / len(self.requests)

    @cached_property
    def task_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.requests:
            counts[r.task] = counts.get(r.task, 0) + 1
        return counts

    @cached_property
    def task_utility(self) -> dict[str, float]:
        """Sum of query utilities per task (expected utility = sum of accuracy x these)."""
        sums: dict[str, float] = {}
        for r in self.requests:
            sums[r.task] = sums.get(r.task, 0.0) + r.slo.utility
        return sums

    def with_request(self, request: Request) -> QueuedBatch:
        return QueuedBatch(self.batch_id, self.requests + (request,))

    def without(self, request_ids: Collection[int]) -> QueuedBatch | None:
        """The batch minus `request_ids`, or None when nothing is left."""
        kept = tuple(r for r in self.requests if r.request_id not in request_ids)
        if len(kept) == len(self.requests):
            return self
        return QueuedBatch(self.batch_id, kept) if kept else None


@dataclass(frozen=True)
class BatchQueue:
    """Batches in creation order (Algorithm 1 scans them newest first)."""

    batches: tuple[QueuedBatch, ...] = ()
    next_batch_id: int = 0
    _index: dict[int, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._index.update({b.batch_id: i for i, b in enumerate(self.batches)})

    def __len__(self) -> int:
        return len(self.batches)

    @property
    def num_requests(self) -> int:
        return sum(b.size for b in self.batches)

    def get(self, batch_id: int) -> QueuedBatch:
        try:
            return self.batches[self._index[batch_id]]
        except KeyError:
            raise ValueError(f"no batch {batch_id} in queue") from None

    def replace(self, batch: QueuedBatch) -> BatchQueue:
        i = self._index[batch.batch_id]
        return BatchQueue(self.batches[:i] + (batch,) + self.batches[i + 1:], self.next_batch_id)

    def pop(self, batch_id: int) -> BatchQueue:
        i = self._index[batch_id]
        return BatchQueue(self.batches[:i] + self.batches[i + 1:], self.next_batch_id)

    def without_requests(self, request_ids: Collection[int]) -> BatchQueue:
        if not request_ids:
            return self
        kept = (b.without(request_ids) for b in self.batches)
        return BatchQueue(tuple(b for b in kept if b is not None), self.next_batch_id)


def add_query(queue: BatchQueue, request: Request, params: BatchingParams) -> BatchQueue:
    """Algorithm 1: put `request` into a matching batch, or open a new one at the tail."""
    batches = queue.batches
    for i in range(len(batches) - 1, -1, -1):
        batch = batches[i]
        if batch.arrival_s + params.max_wait_s < request.arrival_s:
            break  # older batches have waited even longer
        if batch.size >= params.max_batch_size:
            continue
        if abs(batch.deadline_s - request.deadline_s) > params.max_deadline_gap_s:
            continue
        if abs(batch.first_utility - request.slo.utility) > params.max_utility_gap:
            continue
        return queue.replace(batch.with_request(request))
    new_batch = QueuedBatch(queue.next_batch_id, (request,))
    return BatchQueue(batches + (new_batch,), queue.next_batch_id + 1)
