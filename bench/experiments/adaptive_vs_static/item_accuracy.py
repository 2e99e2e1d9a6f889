"""Accuracy on the items a run actually sent, for the simulator as for the live server.

Live, accuracy is measured: each answered item's label against its true label, over the
held-out items the load generator cycles through (`payloads_from_model`: the first `limit`
test examples, call c carrying payload c mod P, so record index i carries item i mod N). The
simulator knows which variant answered each item but not what that variant answered; its
`expected_accuracy` is the variant's accuracy over the profile's whole held-out set, and on the
512 items a run cycles through a variant is right a few points more or less often than that
(vit/g8: 0.834 profiled, ~0.855 on the load generator's items). So a simulated run looks up,
for each item it answered in time, whether that variant is right on that item (`ItemTable`,
measured here by running every variant on those items once, batches of 32, outside any run):
the same quantity the live run measures, from the same held-out data, never from the run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from app.sim.replica.request_metrics import RequestRecord
from bench.core.client import HELD_OUT_ITEMS


@dataclass(frozen=True)
class ItemTable:
    """Whether each variant is right on each of the run's items, in the load generator's order."""

    correct: Mapping[str, tuple[bool, ...]]  # variant name -> per item

    @property
    def items(self) -> int:
        return len(next(iter(self.correct.values()))) if self.correct else 0

    def right(self, variant: str, index: int) -> bool | None:
        """Is `variant` right on record `index`'s item (None: a variant the table lacks)."""
        row = self.correct.get(variant)
        return None if row is None or not row else row[index % len(row)]

    def accuracy(self, records: Iterable[RequestRecord], slo_ms: float) -> float | None:
        """Over the items answered ok within `slo_ms` (the live `accuracy_of_satisfied`)."""
        hits = [self.right(r.variant, r.index) for r in records
                if r.outcome == "ok" and r.variant is not None and r.latency_ms is not None
                and r.latency_ms <= slo_ms]
        known = [h for h in hits if h is not None]
        return sum(known) / len(known) if known else None

    def by_variant(self) -> dict[str, float]:
        return {v: sum(row) / len(row) for v, row in self.correct.items() if row}


def same_items_1x(table: ItemTable, records: Iterable[RequestRecord], static_variant: str,
                  slo_ms: float) -> dict[str, float | int] | None:
    """The accuracy the adaptive policy gives up at 1x, on the same items: over the items its
    run answered ok within `slo_ms`, the static variant's accuracy on them (the table) less
    the adaptive answers' own (their true labels), in points. Comparing each run's own answers
    instead mixes samples: a static past its capacity answers a different subset of items."""
    answered = [r for r in records if r.outcome == "ok" and r.latency_ms is not None
                and r.latency_ms <= slo_ms and r.correct is not None]
    pairs = [(table.right(static_variant, r.index), bool(r.correct)) for r in answered]
    known = [(s, a) for s, a in pairs if s is not None]
    if not known:
        return None
    static = sum(s for s, _ in known) / len(known)
    adaptive = sum(a for _, a in known) / len(known)
    return {"items": len(known), "static_accuracy": static, "adaptive_accuracy": adaptive,
            "gap_pts": 100.0 * (static - adaptive)}


def measure_items(family: str, models_dir: str | Path, task: str | None = None,
                  limit: int = HELD_OUT_ITEMS, batch_size: int = 32) -> ItemTable:
    """Run every variant of `family` on the load generator's items (torch, one thread)."""
    import torch

    from deployments.models.registry import load_model
    from profiling.measure import decode_examples

    torch.set_num_threads(1)
    model = load_model(family, cache_dir=Path(models_dir))
    task = task or model.tasks()[0]
    examples = model.examples("test", task, limit=limit)
    items = decode_examples(model, examples, task)
    labels = [e.label for e in examples]
    correct: dict[str, tuple[bool, ...]] = {}
    with torch.inference_mode():
        for v in model.variants():
            preds = []
            for start in range(0, len(items), batch_size):
                preds += model.run(v, task, items[start:start + batch_size])
            correct[v.name] = tuple(p.label == y for p, y in zip(preds, labels, strict=True))
    return ItemTable(correct)

