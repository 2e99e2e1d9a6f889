"""Latency feedback: keep a profile-based scheduler right when the machine runs slower (or
faster) than when it was profiled (pure).

Every policy plans with profiled batch times. On a shared machine the same batch can take 1.5-2x
longer for minutes at a time (neighbours, co-located serving stack), and a policy that believes
the profile then picks variants that miss their deadlines. `SlowdownTracker` measures the factor
f = live batch time / profiled batch time (median over recent batches); `dilate` hands the
scheduler the queue in "profile time": when every batch takes f times longer, having s seconds
of slack is the same as having s/f seconds on the profiled machine, and arrivals come f times
faster per unit of model time. For RAMSIS this is exact (its MDP is over (queue, slack) and the
load; scaling time by f maps one to the other); for the other policies it is the natural
reading. Wait hints come back scaled by f. The replica loop and the simulator call the same
functions.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, replace

from policies.schedulers.base import PendingItem, SchedulerDecision


@dataclass(frozen=True)
class SlowdownSettings:
    window: int = 32  # batches in the median
    min_samples: int = 4  # below this the factor is 1
    min_profile_ms: float = 2.0  # smaller batches are mostly fixed overhead: not counted
    lo: float = 0.5
    hi: float = 3.0


class SlowdownTracker:
    """Median of measured / profiled batch time over the last `window` counted batches."""

    def __init__(self, settings: SlowdownSettings | None = None) -> None:
        self.settings = settings or SlowdownSettings()
        self.ratios: deque[float] = deque(maxlen=self.settings.window)
        self._factor = 1.0

    def observe(self, profile_ms: float | None, measured_ms: float) -> None:
        s = self.settings
        if profile_ms is None or profile_ms < s.min_profile_ms or measured_ms <= 0:
            return
        self.ratios.append(measured_ms / profile_ms)
        if len(self.ratios) >= s.min_samples:
            self._factor = min(max(statistics.median(self.ratios), s.lo), s.hi)

    @property
    def factor(self) -> float:
        return self._factor


def dilate(pending: tuple[PendingItem, ...], now_s: float, load_qps: float,
           factor: float) -> tuple[tuple[PendingItem, ...], float]:
    """The queue and load as seen on a machine `factor` times faster (ages and slacks / f,
    load x f). Identity for f == 1."""
    if factor == 1.0:
        return pending, load_qps
    out = tuple(replace(p, arrival_s=now_s - (now_s - p.arrival_s) / factor,
                        deadline_s=now_s + (p.deadline_s - now_s) / factor) for p in pending)
    return out, load_qps * factor


def undilate(decision: SchedulerDecision, factor: float) -> SchedulerDecision:
    """A decision taken in profile time, with its wait hint back in real time."""
    if factor == 1.0 or decision.wait_s is None:
        return decision
    return replace(decision, wait_s=decision.wait_s * factor)
