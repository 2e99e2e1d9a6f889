"""A solved RAMSIS policy as a compact lookup table: (queue length, slack) -> (model, batch)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from policies.model_selection.api import Choice, WorkerView
from policies.model_selection.solve import SolvedPolicy

FORMAT_VERSION = 1


@dataclass(frozen=True)
class PolicyTable:
    """model[n-1][j] and batch[n-1][j] for n = 1..N; beyond N the full-queue action applies to the
    whole queue (the fastest model), as in the reference implementation."""

    load_qps: float
    slo_s: float
    num_workers: int
    grid_s: tuple[float, ...]
    model: tuple[tuple[int, ...], ...]
    batch: tuple[tuple[int, ...], ...]
    full_model: int
    expected_accuracy: float
    expected_violation: float
    variant_names: tuple[str, ...]

    @property
    def max_queue(self) -> int:
        return len(self.model)

    def lookup(self, queue_length: int, slack_s: float) -> Choice:
        if queue_length > len(self.model):
            return Choice(self.full_model, queue_length)
        j = bisect.bisect_right(self.grid_s, slack_s + 1e-12) - 1
        if j < 0:
            j = 0
        row = queue_length - 1
        return Choice(self.model[row][j], self.batch[row][j])

    @classmethod
    def from_solved(cls, solved: SolvedPolicy, variant_names: tuple[str, ...]) -> PolicyTable:
        mdp = solved.mdp
        space = mdp.space
        models, batches = [], []
        for n in range(1, space.max_queue + 1):
            rows = [int(solved.row_of_state[space.index(n, j)]) for j in range(space.num_slack)]
            models.append(tuple(int(mdp.row_model[r]) for r in rows))
            batches.append(tuple(int(mdp.row_batch[r]) for r in rows))
        spec = mdp.spec
        return cls(spec.load_qps, spec.slo_s, spec.num_workers,
                   tuple(float(t) for t in space.grid_s), tuple(models), tuple(batches),
                   int(mdp.row_model[solved.row_of_state[space.full]]),
                   solved.expected_accuracy, solved.expected_violation, variant_names)

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "load_qps": self.load_qps, "slo_s": self.slo_s,
                "num_workers": self.num_workers, "grid_s": list(self.grid_s),
                "model": [list(r) for r in self.model], "batch": [list(r) for r in self.batch],
                "full_model": self.full_model, "expected_accuracy": self.expected_accuracy,
                "expected_violation": self.expected_violation,
                "variant_names": list(self.variant_names)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicyTable:
        if data.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"policy format_version {data.get('format_version')!r} unsupported")
        return cls(float(data["load_qps"]), float(data["slo_s"]), int(data["num_workers"]),
                   tuple(data["grid_s"]), tuple(tuple(r) for r in data["model"]),
                   tuple(tuple(r) for r in data["batch"]), int(data["full_model"]),
                   float(data["expected_accuracy"]), float(data["expected_violation"]),
                   tuple(data["variant_names"]))


class RamsisSelector:
    """Online selector (§3.2.2): the lowest-load policy that covers the monitored load (the
    highest one when none does), then one table lookup per batch."""

    name = "ramsis"

    def __init__(self, tables: list[PolicyTable]) -> None:
        if not tables:
            raise ValueError("RAMSIS needs at least one policy table")
        self.tables = sorted(tables, key=lambda t: t.load_qps)
        self.loads = [t.load_qps for t in self.tables]

    def table_for(self, load_qps: float) -> PolicyTable:
        i = bisect.bisect_left(self.loads, load_qps)
        return self.tables[min(i, len(self.tables) - 1)]

    def choose(self, view: WorkerView) -> Choice:
        return self.table_for(view.load_qps).lookup(view.queue_length, view.slack_s)
