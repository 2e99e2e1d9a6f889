"""Pieces of the scheduler simulator: batch service times from a profile and the replica's
arrival-rate window (pure)."""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from policies.profile import LatencyModel, Profile, dense_latency_ms

_Z95 = 1.6448536269514722


class ServiceTimes:
    """Batch latency (seconds) per variant name and batch size."""

    def __init__(self, profile: Profile, mode: str, max_batch_size: int | None, seed: int) -> None:
        self.mode = mode
        pct = "p50" if mode == "sampled" else mode
        self.model = LatencyModel.from_profile(profile, pct, max_batch_size)
        self.sigma: dict[str, list[float]] = {}
        if mode == "sampled":
            n = self.model.max_batch_size
            for v in profile.variants:
                p50 = dense_latency_ms(v.latency, "p50", n)
                p95 = dense_latency_ms(v.latency, "p95", n)
                self.sigma[v.variant.name] = [max(0.0, math.log(max(b, a) / a)) / _Z95 if a > 0
                                              else 0.0 for a, b in zip(p50, p95, strict=True)]
        self.rng = np.random.default_rng(seed + 7)

    def __call__(self, variant: str, batch_size: int) -> float:
        median = self.model.latency(self.model.index(variant), batch_size)
        if self.mode != "sampled":
            return median
        sig = self.sigma[variant]
        s = sig[min(batch_size, len(sig)) - 1]
        return float(median * math.exp(s * float(self.rng.standard_normal())))


class RateWindow:
    """Arrivals per second over the last `window_s` (as policies.queue.RateWindow)."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self.times: deque[float] = deque()
        self.started: float | None = None

    def record(self, now_s: float) -> None:
        if self.started is None:
            self.started = now_s
        self.times.append(now_s)

    def qps(self, now_s: float) -> float:
        while self.times and self.times[0] <= now_s - self.window_s:
            self.times.popleft()
        if self.started is None or not self.times:
            return 0.0
        return len(self.times) / min(self.window_s, max(now_s - self.started, 0.25))
