"""Counters a classifier replica keeps for the controller (deltas since the last report)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from deployments.wire import ItemResult, ItemStatus

COUNTER_NAMES = ("requests", "ok", "deadline_met", "late", "deadline_exceeded", "shed",
                 "errors", "accuracy_sum", "batches", "batch_items", "decoded")


@dataclass
class ReplicaCounters:
    """Plain sums; `take()` hands them over and starts a new delta, `restore()` puts back a
    delta whose report failed so nothing is lost or counted twice."""

    values: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTER_NAMES, 0.0))
    variants: Counter[str] = field(default_factory=Counter)

    def arrived(self, count: int) -> None:
        self.values["requests"] += count

    def decoded(self, count: int) -> None:
        """Items this replica decoded (decode work spent, whether or not they were queued)."""
        self.values["decoded"] += count

    def batch(self, size: int) -> None:
        self.values["batches"] += 1
        self.values["batch_items"] += size

    def answered(self, result: ItemResult) -> None:
        v = self.values
        if result.status is ItemStatus.OK and result.decision is not None:
            v["ok"] += 1
            v["accuracy_sum"] += result.decision.expected_accuracy
            v["deadline_met" if result.decision.deadline_met else "late"] += 1
            self.variants[result.decision.variant] += 1
        elif result.status is ItemStatus.DEADLINE_EXCEEDED:
            v["deadline_exceeded"] += 1
        elif result.status is ItemStatus.SHED:
            v["shed"] += 1
        else:
            v["errors"] += 1

    def take(self) -> tuple[dict[str, float], dict[str, int]]:
        values, variants = dict(self.values), dict(self.variants)
        self.values = dict.fromkeys(COUNTER_NAMES, 0.0)
        self.variants = Counter()
        return values, variants

    def restore(self, values: dict[str, float], variants: dict[str, int]) -> None:
        for k, x in values.items():
            self.values[k] = self.values.get(k, 0.0) + x
        self.variants.update(variants)
