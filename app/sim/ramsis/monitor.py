"""Load monitor: arrivals per second over a trailing window (500 ms by default, as RAMSIS)."""

from __future__ import annotations

from collections import deque


class LoadMonitor:
    """Moving average of the central arrival rate over the last `window_s` seconds."""

    def __init__(self, window_s: float = 0.5) -> None:
        if window_s <= 0:
            raise ValueError(f"window must be positive, got {window_s}")
        self.window_s = window_s
        self._times: deque[float] = deque()

    def record(self, time_s: float) -> None:
        self._times.append(time_s)

    def qps(self, now_s: float) -> float:
        horizon = now_s - self.window_s
        times = self._times
        while times and times[0] <= horizon:
            times.popleft()
        return len(times) / self.window_s
