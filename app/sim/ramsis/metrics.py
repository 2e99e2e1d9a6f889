"""Summaries of a simulation run: accuracy per satisfied query, SLO violations, goodput,
latency percentiles and variant usage over time."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.ramsis.engine import SimRecord
from policies.profile import LatencyModel

_EPS_S = 1e-9


@dataclass(frozen=True)
class RunSummary:
    policy: str
    num_queries: int
    accuracy_per_satisfied: float
    violation_rate: float
    goodput_qps: float
    mean_accuracy_all: float
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    variant_share: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(policy: str, record: SimRecord, model: LatencyModel, slo_s: float,
              duration_s: float) -> RunSummary:
    served = ~np.isnan(record.finish_s)
    latency = record.finish_s[served] - record.arrivals_s[served]
    satisfied = latency <= slo_s + _EPS_S
    acc = np.asarray(model.accuracy)[record.variant[served]]
    n = int(served.sum())
    counts = np.bincount(record.variant[served], minlength=len(model.names))
    pct = np.percentile(latency * 1000, [50, 95, 99]) if n else np.zeros(3)
    return RunSummary(
        policy=policy,
        num_queries=n,
        accuracy_per_satisfied=float(acc[satisfied].mean()) if satisfied.any() else 0.0,
        violation_rate=float(1.0 - satisfied.mean()) if n else 0.0,
        goodput_qps=float(satisfied.sum() / duration_s) if duration_s > 0 else 0.0,
        mean_accuracy_all=float(acc.mean()) if n else 0.0,
        latency_p50_ms=float(pct[0]),
        latency_p95_ms=float(pct[1]),
        latency_p99_ms=float(pct[2]),
        variant_share={name: float(c / max(n, 1)) for name, c in zip(model.names, counts, strict=True)},
    )


def usage_over_time(record: SimRecord, num_variants: int, bin_s: float = 1.0) -> NDArray[Any]:
    """Queries served per (time bin, variant), binned by batch start time."""
    if record.batch_start_s.size == 0:
        return np.zeros((0, num_variants))
    bins = (record.batch_start_s // bin_s).astype(int)
    out = np.zeros((int(bins.max()) + 1, num_variants))
    np.add.at(out, (bins, record.batch_variant), record.batch_size)
    return out
