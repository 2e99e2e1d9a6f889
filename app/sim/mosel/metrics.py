"""Outcome records and summaries for the MOSEL simulation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policies.modality.matrix import ACCURACY_EPS
from policies.modality.replan import DEADLINE_EPS_S
from policies.modality.tables import ModalityTables
from policies.types import Job

PAPER_CAUSES = ("blocked", "at-arrival", "later")
SERVED_CAUSES = (*PAPER_CAUSES, "expired")  # expired: the deadline passed while it waited


@dataclass(frozen=True)
class JobRecord:
    """How one job ended. `accuracy` is None for dropped jobs (answered without inference)."""

    job_id: int
    worker: int
    num_requests: int
    arrival_s: float
    deadline_s: float
    accuracy_slo: float
    finish_s: float | None
    accuracy: float | None
    dropped: bool
    drop_cause: str | None = None  # see drop_cause

    @property
    def met_latency(self) -> bool:
        return self.finish_s is not None and self.finish_s <= self.deadline_s + DEADLINE_EPS_S

    @property
    def met_accuracy(self) -> bool:
        return self.accuracy is not None and self.accuracy >= self.accuracy_slo - ACCURACY_EPS

    @property
    def met_both(self) -> bool:
        return not self.dropped and self.met_latency and self.met_accuracy


def drop_cause(tables: ModalityTables, job: Job, free_at_s: float, now: float) -> str:
    """'blocked': misses even alone on its fastest strategy once the worker frees up;
    'at-arrival' / 'later': would fit alone, dropped on arrival / at a later re-plan."""
    options = tables.options(job.num_requests, job.slo.min_accuracy or 0.0)
    if not options.candidates or free_at_s + options.candidates[0].latency_s > job.deadline_s:
        return "blocked"
    return "at-arrival" if now == job.arrival_s else "later"


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(records: list[JobRecord], decision_s: list[float], horizon_s: float,
              bucket_s: float = 10.0, causes: tuple[str, ...] = PAPER_CAUSES) -> dict[str, Any]:
    """Request-level totals, accuracy of served requests, and a goodput time series. A job
    may have several records (its served part, its dropped part)."""
    total = sum(r.num_requests for r in records)
    met = sum(r.num_requests for r in records if r.met_both)
    dropped = sum(r.num_requests for r in records if r.dropped)
    late = sum(r.num_requests for r in records if not r.dropped and not r.met_latency)
    served = [r for r in records if r.accuracy is not None]
    served_n = sum(r.num_requests for r in served)
    acc_sum = sum(r.accuracy * r.num_requests for r in served if r.accuracy is not None)
    buckets = [0] * (int(horizon_s // bucket_s) + 1)
    for r in records:
        if r.met_both:
            buckets[min(int(r.arrival_s // bucket_s), len(buckets) - 1)] += r.num_requests
    completion = [r.finish_s - r.arrival_s for r in records if r.finish_s is not None]
    return {
        "jobs": len({r.job_id for r in records}),
        "requests": total,
        "met_both_slos": met,
        "slo_violations": total - met,
        "violation_ratio": (total - met) / total if total else 0.0,
        "dropped": dropped,
        "late": late,
        "dropped_by_cause": {c: sum(r.num_requests for r in records if r.drop_cause == c)
                             for c in causes},
        "mean_accuracy_served": acc_sum / served_n if served_n else 0.0,
        "mean_completion_s": sum(completion) / len(completion) if completion else 0.0,
        "goodput_per_bucket": [b / bucket_s for b in buckets],
        "bucket_s": bucket_s,
        "decisions": len(decision_s),
        "decision_p50_us": _percentile(decision_s, 0.50) * 1e6,
        "decision_p99_us": _percentile(decision_s, 0.99) * 1e6,
    }
