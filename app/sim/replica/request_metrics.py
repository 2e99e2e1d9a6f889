"""Per-request records and their summary, shared by the live load generator and the scheduler
simulator so both report exactly the same metrics (pure: no I/O).

Outcomes: "ok" (a prediction), "deadline_exceeded" and "shed" (answered by the server without a
prediction), "refused" (HTTP 429/503: admission said no before doing the work), "error" (other
HTTP 4xx/5xx, connection failure, unparsable body) and "timeout" (no answer within the client's
timeout). Every sent request has exactly one record.

- satisfied = outcome ok and client latency <= SLO; goodput = satisfied per second of the run;
- admitted = sent - shed - refused (the server turned down only those);
- accuracy of satisfied: fraction of satisfied answers whose label is right (the expected
  accuracy of the chosen variant stands in where the true label is unknown, as in the simulator).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

OUTCOMES = ("ok", "deadline_exceeded", "shed", "refused", "error", "timeout")
_EPS_MS = 1e-6


@dataclass(frozen=True)
class RequestRecord:
    index: int
    scheduled_s: float  # planned send offset from the start of the run
    sent_s: float  # actual send offset (open loop: scheduled_s plus event-loop jitter)
    outcome: str
    latency_ms: float | None = None  # client-side end to end; None without an answer
    status_code: int = 0  # HTTP status; 0 when no response came
    label: int | None = None
    predicted: int | None = None
    variant: str | None = None
    batch_size: int | None = None
    queue_ms: float | None = None
    compute_ms: float | None = None
    expected_accuracy: float | None = None
    replica: str | None = None
    job_id: str | None = None
    error: str | None = None
    server_ms: float | None = None  # the server's own latency (ingress arrival -> answer)
    dispatch_ms: float | None = None  # ingress arrival -> replica queue (part of queue_ms)
    retry_after_s: float | None = None  # a refusal's Retry-After, where it gave one
    server_deadline_met: bool | None = None  # the server's own verdict, where it gave one

    @property
    def correct(self) -> bool | None:
        if self.label is None or self.predicted is None:
            return None
        return self.label == self.predicted

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class LoadSummary:
    duration_s: float
    slo_ms: float
    sent: int
    answered: int
    ok: int
    deadline_exceeded: int
    shed: int
    errors: int
    timeouts: int
    satisfied: int
    offered_qps: float
    goodput_qps: float
    slo_attainment: float
    slo_attainment_admitted: float
    accuracy_of_satisfied: float
    expected_accuracy_of_satisfied: float
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    overhead_p50_ms: float  # p50 of (latency - compute) over ok answers reporting compute
    compute_p50_ms: float
    mean_batch_size: float
    max_send_lag_ms: float
    variant_share: dict[str, float]
    refused: int = 0  # last, with a default: summaries saved before it existed still load

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def is_satisfied(r: RequestRecord, slo_ms: float) -> bool:
    return r.outcome == "ok" and r.latency_ms is not None and r.latency_ms <= slo_ms + _EPS_MS


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def _item_accuracy(r: RequestRecord) -> float | None:
    correct = r.correct
    if correct is not None:
        return 1.0 if correct else 0.0
    return r.expected_accuracy


def summarize(records: list[RequestRecord], duration_s: float, slo_ms: float) -> LoadSummary:
    counts = Counter(r.outcome for r in records)
    unknown = set(counts) - set(OUTCOMES)
    if unknown:
        raise ValueError(f"unknown outcomes {sorted(unknown)}; valid: {list(OUTCOMES)}")
    sent = len(records)
    ok = [r for r in records if r.outcome == "ok"]
    sat = [r for r in ok if is_satisfied(r, slo_ms)]
    admitted = sent - counts["shed"] - counts["refused"]
    lat = [r.latency_ms for r in ok if r.latency_ms is not None]
    overhead = [r.latency_ms - r.compute_ms for r in ok
                if r.latency_ms is not None and r.compute_ms is not None]
    compute = [r.compute_ms for r in ok if r.compute_ms is not None]
    accs = [a for a in (_item_accuracy(r) for r in sat) if a is not None]
    exp = [r.expected_accuracy for r in sat if r.expected_accuracy is not None]
    variants = Counter(r.variant for r in ok if r.variant is not None)
    lags = [1000.0 * (r.sent_s - r.scheduled_s) for r in records]
    return LoadSummary(
        duration_s=duration_s,
        slo_ms=slo_ms,
        sent=sent,
        answered=counts["ok"] + counts["deadline_exceeded"] + counts["shed"] + counts["refused"],
        ok=counts["ok"],
        deadline_exceeded=counts["deadline_exceeded"],
        shed=counts["shed"],
        errors=counts["error"],
        timeouts=counts["timeout"],
        satisfied=len(sat),
        offered_qps=sent / duration_s if duration_s > 0 else 0.0,
        goodput_qps=len(sat) / duration_s if duration_s > 0 else 0.0,
        slo_attainment=len(sat) / sent if sent else float("nan"),
        slo_attainment_admitted=len(sat) / admitted if admitted else float("nan"),
        accuracy_of_satisfied=_mean(accs),
        expected_accuracy_of_satisfied=_mean(exp),
        latency_p50_ms=_pct(lat, 50),
        latency_p95_ms=_pct(lat, 95),
        latency_p99_ms=_pct(lat, 99),
        overhead_p50_ms=_pct(overhead, 50),
        compute_p50_ms=_pct(compute, 50),
        mean_batch_size=_mean([float(r.batch_size) for r in ok if r.batch_size is not None]),
        max_send_lag_ms=max(lags) if lags else 0.0,
        variant_share={v: c / len(ok) for v, c in sorted(variants.items())},
        refused=counts["refused"],
    )


def timeseries(records: list[RequestRecord], duration_s: float, slo_ms: float,
               bin_s: float = 1.0) -> dict[str, Any]:
    """Per time bin (by scheduled send time): offered load, goodput, latency percentiles of ok
    answers and ok answers per variant (all per second)."""
    nbins = max(1, int(np.ceil(duration_s / bin_s)))
    variants = sorted({r.variant for r in records if r.outcome == "ok" and r.variant})
    sent = np.zeros(nbins)
    good = np.zeros(nbins)
    usage = np.zeros((nbins, len(variants)))
    lat: list[list[float]] = [[] for _ in range(nbins)]
    for r in records:
        b = min(nbins - 1, max(0, int(r.scheduled_s // bin_s)))
        sent[b] += 1
        if r.outcome == "ok" and r.latency_ms is not None:
            lat[b].append(r.latency_ms)
            if r.variant:
                usage[b, variants.index(r.variant)] += 1
        if is_satisfied(r, slo_ms):
            good[b] += 1
    return {
        "bin_s": bin_s,
        "t_s": [bin_s * i for i in range(nbins)],
        "offered_qps": (sent / bin_s).tolist(),
        "goodput_qps": (good / bin_s).tolist(),
        "latency_p50_ms": [_pct(x, 50) for x in lat],
        "latency_p95_ms": [_pct(x, 95) for x in lat],
        "latency_p99_ms": [_pct(x, 99) for x in lat],
        "variants": variants,
        "usage_qps": (usage / bin_s).tolist(),
    }


def summary_table(rows: dict[str, LoadSummary]) -> str:
    """One line per run: the columns loadgen prints."""
    head = (f"{'run':<22}{'sent':>7}{'ans':>7}{'ok':>7}{'dl_exc':>7}{'shed':>6}{'err':>5}"
            f"{'goodput':>9}{'att%':>7}{'att_adm%':>9}{'acc_sat':>8}{'p50':>7}{'p95':>7}{'p99':>7}"
            f"  variants")
    lines = [head]
    for name, s in rows.items():
        share = " ".join(f"{v}:{100 * x:.0f}%" for v, x in s.variant_share.items())
        lines.append(
            f"{name:<22}{s.sent:>7}{s.answered:>7}{s.ok:>7}{s.deadline_exceeded:>7}{s.shed:>6}"
            f"{s.errors + s.timeouts:>5}{s.goodput_qps:>9.1f}{100 * s.slo_attainment:>7.1f}"
            f"{100 * s.slo_attainment_admitted:>9.1f}{s.accuracy_of_satisfied:>8.3f}"
            f"{s.latency_p50_ms:>7.0f}{s.latency_p95_ms:>7.0f}{s.latency_p99_ms:>7.0f}  {share}")
    return "\n".join(lines)
