"""What a per-worker model-selection policy sees, and what it answers (used by replicas and the simulator)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class WorkerView:
    """A worker's decision context: its queue, the earliest deadline's slack and the load."""

    worker_id: int
    queue_length: int
    slack_s: float
    load_qps: float
    now_s: float


@dataclass(frozen=True)
class Choice:
    """Run the `batch_size` earliest-deadline queries on variant `variant_index`."""

    variant_index: int
    batch_size: int


class SelectionPolicy(Protocol):
    """A per-batch model-selection policy (RAMSIS, a baseline, ...)."""

    name: str

    def choose(self, view: WorkerView) -> Choice:
        """Return the variant and batch size for the next batch; `view.queue_length` >= 1 and
        1 <= batch_size <= queue_length must hold for the returned choice."""
        ...
