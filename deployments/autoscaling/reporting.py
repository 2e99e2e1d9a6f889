"""What a replica reports to Serve's autoscaler (`record_autoscaling_stats`): the rates of what
arrives at it, counted where calls arrive (policies/autoscaling/meter.py), under the metric
names the policies sum (decisions.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from policies.autoscaling.meter import RateMeter


class ArrivalRates:
    """Named arrival meters of one replica, on one clock."""

    def __init__(self, names: Iterable[str], window_s: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        now = clock()
        self.meters = {n: RateMeter(window_s, now) for n in names}

    def add(self, name: str, amount: float) -> None:
        self.meters[name].add(self.clock(), amount)

    def rates(self) -> dict[str, float]:
        now = self.clock()
        return {n: m.rate(now) for n, m in self.meters.items()}
