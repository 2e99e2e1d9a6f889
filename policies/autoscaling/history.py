"""A past workload as data (`policies.autoscaling.History`), read from and written to JSON, and
the classifiers' capacity from their latency profile. Pure.

History file (one per model, e.g. `.cache/history/vlm.history.json`; the burst benchmark writes
one from its run, python -m bench autoscaling-burst):

    {"format_version": 1, "window_s": 5.0, "source": "...",
     "image_qps": [...], "encode_latency_s": [...], "request_qps": [...],
     "images_per_request": [...], "text_tokens_per_request": [...]}

one value per window in each list (the lists may differ in length: each is a sample of its own).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from policies.autoscaling.app import History

HISTORY_FORMAT_VERSION = 1
HISTORY_FIELDS = ("image_qps", "encode_latency_s", "request_qps", "images_per_request",
                  "text_tokens_per_request")


def _floats(data: Mapping[str, Any], name: str) -> tuple[float, ...]:
    values = data.get(name)
    if not isinstance(values, Sequence) or isinstance(values, str) or not values:
        raise ValueError(f"history: {name!r} must be a non-empty list of numbers")
    out = tuple(float(v) for v in values)
    if any(not math.isfinite(v) or v < 0 for v in out):
        raise ValueError(f"history: {name!r} must hold finite numbers >= 0")
    return out


def history_from_json(data: Mapping[str, Any]) -> History:
    version = data.get("format_version")
    if version != HISTORY_FORMAT_VERSION:
        raise ValueError(f"history format_version {version!r}; this code reads "
                         f"{HISTORY_FORMAT_VERSION}")
    unknown = sorted(set(data) - {*HISTORY_FIELDS, "format_version", "window_s", "source"})
    if unknown:
        raise ValueError(f"history: unknown keys {unknown}; valid: {list(HISTORY_FIELDS)}, "
                         "format_version, window_s, source")
    return History(*(_floats(data, f) for f in HISTORY_FIELDS))


def history_to_json(history: History, window_s: float, source: str) -> dict[str, Any]:
    return {"format_version": HISTORY_FORMAT_VERSION, "window_s": window_s, "source": source,
            **{f: [round(float(v), 6) for v in getattr(history, f)] for f in HISTORY_FIELDS}}


def items_capacity_per_s(latency_s: Callable[[int], float], max_batch_size: int,
                         slo_s: float, latency_share: float = 0.5) -> float:
    """Items/s one classifier replica sustains: the best b / latency(b) over batches up to
    `max_batch_size` whose latency fits `latency_share` of the SLO (an item may wait one batch,
    then run in the next: 0.5); at least batch 1's rate (a replica always makes progress)."""
    if max_batch_size < 1 or slo_s <= 0 or not 0 < latency_share <= 1:
        raise ValueError("need max_batch_size >= 1, slo_s > 0, 0 < latency_share <= 1")
    best = 1.0 / latency_s(1)
    for b in range(2, max_batch_size + 1):
        lat = latency_s(b)
        if lat <= latency_share * slo_s:
            best = max(best, b / lat)
    return best
