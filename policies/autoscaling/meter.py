"""A windowed rate of an amount (tokens, items) per second, pure: times are passed in.

The stage replicas count what arrives (image tokens at an encoder, text and image prompt tokens
at an LLM replica) and report the rate to Serve's autoscaler (`record_autoscaling_stats`,
deployments/autoscaling/). Arrivals carry amounts (a call brings hundreds of tokens), so the
meter keeps per-bucket totals, not one entry per unit (policies.queue.RateWindow counts unit
arrivals): memory is bounded by the number of buckets whatever the traffic.

`rate(now)` is the amount in the window ending at `now` divided by the span the counted buckets
cover: the whole buckets before the current one plus the current one's elapsed part, at most
`window_s`, and never more than the time since the meter started (a replica that started a
second ago and got 100 tokens reports 100 tokens/s, not 100 / window_s), at least `min_span_s`.
"""

from __future__ import annotations

import math
from collections import deque


class RateMeter:
    def __init__(self, window_s: float, started_s: float, buckets: int = 10,
                 min_span_s: float = 0.25) -> None:
        if not (window_s > 0 and math.isfinite(window_s)):
            raise ValueError(f"window_s must be finite and > 0, got {window_s}")
        if buckets < 1:
            raise ValueError(f"buckets must be >= 1, got {buckets}")
        if min_span_s <= 0:
            raise ValueError(f"min_span_s must be > 0, got {min_span_s}")
        self.window_s = window_s
        self.bucket_s = window_s / buckets
        self.buckets = buckets
        self.min_span_s = min_span_s
        self.started_s = started_s
        self._totals: deque[list[float]] = deque()  # [bucket index, amount], oldest first
        self.total = 0.0  # everything ever added

    def _index(self, now_s: float) -> int:
        return math.floor(now_s / self.bucket_s)

    def _expire(self, current: int) -> None:
        oldest = current - self.buckets + 1
        totals = self._totals
        while totals and totals[0][0] < oldest:
            totals.popleft()

    def add(self, now_s: float, amount: float = 1.0) -> None:
        if not amount > 0:  # also drops NaN
            return
        i = self._index(now_s)
        totals = self._totals
        if totals and totals[-1][0] >= i:  # this bucket (or a clock step back: the newest)
            totals[-1][1] += amount
        else:
            totals.append([i, amount])
            self._expire(i)
        self.total += amount

    def rate(self, now_s: float) -> float:
        """Amount per second over the window ending at `now_s` (module docstring)."""
        current = self._index(now_s)
        self._expire(current)
        amount = sum(t for _, t in self._totals)
        if amount <= 0:
            return 0.0
        span = (self.buckets - 1) * self.bucket_s + (now_s - current * self.bucket_s)
        span = min(span, self.window_s, now_s - self.started_s)
        return amount / max(span, self.min_span_s)


class ShareSinceLast:
    """good / (good + bad) of what happened since the previous call, from cumulative counts
    (e.g. images encoded and images whose deadline was lost): a replica's SLO attainment per
    report. None when nothing happened since (no evidence either way)."""

    def __init__(self) -> None:
        self._good = 0.0
        self._bad = 0.0

    def take(self, good_total: float, bad_total: float) -> float | None:
        good, bad = good_total - self._good, bad_total - self._bad
        self._good, self._bad = good_total, bad_total
        if good < 0 or bad < 0:  # the counters were reset: start over
            return None
        return good / (good + bad) if good + bad > 0 else None
