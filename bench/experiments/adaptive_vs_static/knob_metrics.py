"""What the other two knobs are judged by, from per-item records (live or simulated; pure):

- OTAS's utility (docs/otas.md, the paper's problem (1)): only an accurate answer within the
  deadline (type 1) earns its query's utility. Per item: the utility of its call
  (app/sim/replica/utilities.py) times its correctness, 1/0 where the true label is known (live)
  or the variant's expected accuracy where it is not (simulated), for items answered ok within
  the SLO. Reported per second, as goodput is.
- MOSEL's goodput at the accuracy SLO (docs/mosel.md, "met both"): items answered ok within the
  latency SLO whose call (a job, or a single request) meets the accuracy floor: the mean
  expected accuracy of the call's answered items (the profile's accuracy of the modality subsets
  it ran, as MOSEL plans it) >= `min_accuracy`. Without a floor it is the goodput.

Items are grouped into calls by index (item i of calls of n items belongs to call i // n), as
both the load generator and the simulator number them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.sim.replica.request_metrics import RequestRecord, is_satisfied
from app.sim.replica.utilities import call_utility, check_utilities

ACCURACY_EPS = 1e-9  # as MOSEL's own comparison (policies/modality/matrix.py)
TABLE_II = "table2"  # OTAS's Table II query utilities, in the table's order


def parse_utilities(text: str | None) -> tuple[float, ...]:
    """Per-call utilities from the command line: `table2` (OTAS's Table II: 0.3, 0.01, 1, 0.2,
    0.3, 0.01), comma-separated values, or nothing (every call 1.0)."""
    if not text:
        return ()
    if text == TABLE_II:
        from app.sim.otas.profile import TABLE_II as QUERY_TYPES

        return tuple(q.utility for q in QUERY_TYPES)
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise ValueError(f"utilities: {TABLE_II!r} or comma-separated numbers, got "
                         f"{text!r}") from exc
    check_utilities(values)
    return values


@dataclass(frozen=True)
class KnobMetrics:
    """Counts over one run (or several pooled: `pool`); rates per second of `duration_s`."""

    duration_s: float
    sent: int
    satisfied: int  # ok within the SLO
    utility: float  # earned: correct answers within the SLO, weighted by their utility
    offered_utility: float  # every sent item's utility
    accuracy_satisfied: int  # satisfied, in a call meeting the accuracy floor
    min_accuracy: float | None = None

    def rate(self, count: float) -> float:
        return count / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def goodput_qps(self) -> float:
        return self.rate(self.satisfied)

    @property
    def utility_qps(self) -> float:
        return self.rate(self.utility)

    @property
    def accuracy_goodput_qps(self) -> float:
        return self.rate(self.accuracy_satisfied)

    @property
    def attainment(self) -> float:
        return self.satisfied / self.sent if self.sent else float("nan")

    @property
    def accuracy_attainment(self) -> float:
        return self.accuracy_satisfied / self.sent if self.sent else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {"duration_s": self.duration_s, "sent": self.sent, "satisfied": self.satisfied,
                "utility": self.utility, "offered_utility": self.offered_utility,
                "accuracy_satisfied": self.accuracy_satisfied, "min_accuracy": self.min_accuracy,
                "goodput_qps": self.goodput_qps, "attainment": self.attainment,
                "utility_qps": self.utility_qps,
                "accuracy_goodput_qps": self.accuracy_goodput_qps,
                "accuracy_attainment": self.accuracy_attainment}


def _correctness(r: RequestRecord) -> float:
    correct = r.correct
    if correct is not None:
        return 1.0 if correct else 0.0
    return r.expected_accuracy if r.expected_accuracy is not None else 0.0


def calls_meeting_floor(records: Iterable[RequestRecord], job_size: int,
                        min_accuracy: float | None) -> set[int]:
    """Calls whose answered (ok) items' mean expected accuracy meets `min_accuracy` (every call
    with an ok item when there is no floor)."""
    sums: dict[int, list[float]] = {}
    for r in records:
        if r.outcome == "ok":
            s = sums.setdefault(r.index // job_size, [0.0, 0.0])
            s[0] += r.expected_accuracy if r.expected_accuracy is not None else 0.0
            s[1] += 1
    floor = -1.0 if min_accuracy is None else min_accuracy - ACCURACY_EPS
    return {call for call, (acc, n) in sums.items() if acc / n >= floor}


def knob_metrics(records: Sequence[RequestRecord], duration_s: float, slo_ms: float,
                 job_size: int = 1, min_accuracy: float | None = None,
                 utilities: Sequence[float] = ()) -> KnobMetrics:
    """The counts of one run (see module doc)."""
    met_floor = calls_meeting_floor(records, job_size, min_accuracy)
    satisfied = accuracy_satisfied = 0
    utility = offered = 0.0
    for r in records:
        u = call_utility(r.index // job_size, utilities)
        offered += u
        if is_satisfied(r, slo_ms):
            satisfied += 1
            utility += u * _correctness(r)
            if r.index // job_size in met_floor:
                accuracy_satisfied += 1
    return KnobMetrics(duration_s, len(records), satisfied, utility, offered, accuracy_satisfied,
                       min_accuracy)


def pool(runs: Sequence[KnobMetrics]) -> KnobMetrics:
    """Several runs as one (the simulator's seeds): counts and durations summed."""
    if not runs:
        raise ValueError("nothing to pool")
    return KnobMetrics(sum(m.duration_s for m in runs), sum(m.sent for m in runs),
                       sum(m.satisfied for m in runs), sum(m.utility for m in runs),
                       sum(m.offered_utility for m in runs),
                       sum(m.accuracy_satisfied for m in runs), runs[0].min_accuracy)


def ratio(a: float, b: float) -> float | None:
    """a / b, None where b is 0 (a static configuration that delivered nothing)."""
    return a / b if b > 0 else None


def knob_ratios(adaptive: KnobMetrics, static: KnobMetrics) -> dict[str, float | None]:
    """Adaptive over static on each knob's figure."""
    return {"goodput": ratio(adaptive.goodput_qps, static.goodput_qps),
            "utility": ratio(adaptive.utility_qps, static.utility_qps),
            "accuracy_goodput": ratio(adaptive.accuracy_goodput_qps,
                                      static.accuracy_goodput_qps)}
