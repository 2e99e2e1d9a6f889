"""What the single-request benchmark (bench/experiments/single_request/run.py) reads from a run's records, and when
its capacity ramp stops (pure: no I/O).

The issue's figures need more than `LoadSummary` holds: how fast refusals come back (a refusal
is only useful if it is cheap), and whether the server's own SLO verdict agrees with the
client's (the server's clock may start late, after the time a request queued in front of it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.sim.replica.request_metrics import LoadSummary, RequestRecord
from bench.core.stats import percentile_or_nan
from deployments.ingress.proxy.front_door import REFUSAL_MARK


@dataclass(frozen=True)
class FrontRun:
    """One load run's figures; latencies are the client's, in ms; attainments are fractions."""

    name: str
    offered_qps: float
    duration_s: float
    sent: int
    answered: int
    ok: int
    refused: int
    deadline_exceeded: int
    shed: int
    errors: int  # transport errors, other HTTP errors and client timeouts
    attainment: float  # answered ok within the SLO, of sent
    attainment_admitted: float  # of sent - refused - shed
    goodput_qps: float
    p50_ms: float  # of ok answers
    p99_ms: float
    refusal_p99_ms: float  # of refusals; NaN without any
    refusals_with_retry_after: int
    server_attainment_admitted: float  # the server's own deadline_met, of admitted
    gap_pts: float  # server minus client attainment of admitted, percentage points
    door_refused: int = 0  # refusals by the proxy's front door (the rest: the ingress's)
    door_refusal_p99_ms: float = math.nan
    ingress_refusal_p99_ms: float = math.nan  # the ingress's second-line (deadline) refusals
    correct_qps: float = math.nan  # answers ok within the SLO and correct (true labels), per s

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def front_run(name: str, summary: LoadSummary, records: Sequence[RequestRecord]) -> FrontRun:
    """The run's figures from its summary and records (one record per request)."""
    refusals = [r for r in records if r.outcome == "refused"]
    refusal_ms = [r.latency_ms for r in refusals if r.latency_ms is not None]
    door = [r for r in refusals if REFUSAL_MARK in (r.error or "")]
    door_ms = [r.latency_ms for r in door if r.latency_ms is not None]
    ingress_ms = [r.latency_ms for r in refusals
                  if REFUSAL_MARK not in (r.error or "") and r.latency_ms is not None]
    admitted = summary.sent - summary.refused - summary.shed
    server_met = sum(1 for r in records if r.outcome == "ok" and r.server_deadline_met is True)
    server_att = server_met / admitted if admitted else math.nan
    return FrontRun(
        name=name, offered_qps=summary.offered_qps, duration_s=summary.duration_s,
        sent=summary.sent, answered=summary.answered, ok=summary.ok, refused=summary.refused,
        deadline_exceeded=summary.deadline_exceeded, shed=summary.shed,
        errors=summary.errors + summary.timeouts, attainment=summary.slo_attainment,
        attainment_admitted=summary.slo_attainment_admitted,
        goodput_qps=summary.goodput_qps, p50_ms=summary.latency_p50_ms,
        p99_ms=summary.latency_p99_ms, refusal_p99_ms=percentile_or_nan(refusal_ms, 99),
        refusals_with_retry_after=sum(1 for r in refusals if r.retry_after_s is not None),
        server_attainment_admitted=server_att,
        gap_pts=100.0 * (server_att - summary.slo_attainment_admitted),
        door_refused=len(door), door_refusal_p99_ms=percentile_or_nan(door_ms, 99),
        ingress_refusal_p99_ms=percentile_or_nan(ingress_ms, 99),
        correct_qps=summary.goodput_qps * summary.accuracy_of_satisfied
        if summary.satisfied else 0.0)


@dataclass(frozen=True)
class RampRule:
    """A ramp step at or above `min_attainment` (of sent) counts towards capacity; the ramp
    stops at the first step below it, or whose goodput adds less than `min_gain` to the best
    so far (the system has stopped delivering more)."""

    min_attainment: float = 0.95
    min_gain: float = 0.03


def ramp_done(steps: Sequence[FrontRun], rule: RampRule) -> bool:
    """Whether the ramp should stop after its last step."""
    if not steps:
        return False
    last, before = steps[-1], steps[:-1]
    best = max((s.goodput_qps for s in before), default=0.0)
    return last.attainment < rule.min_attainment or (
        bool(before) and last.goodput_qps < (1.0 + rule.min_gain) * best)


@dataclass(frozen=True)
class Capacity:
    """The best goodput among the steps that kept `min_attainment` of sent within the SLO."""

    qps: float
    step: str
    offered_qps: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pick_capacity(steps: Sequence[FrontRun], rule: RampRule) -> Capacity | None:
    """Capacity of a ramp, or None where not even its first step met the attainment bar."""
    good = [s for s in steps if s.attainment >= rule.min_attainment]
    if not good:
        return None
    best = max(good, key=lambda s: s.goodput_qps)
    return Capacity(best.goodput_qps, best.name, best.offered_qps)
