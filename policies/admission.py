"""A concurrency limit per model family at the front door (the Serve proxy), set by AIMD on the
latency clients see: the arithmetic only, so the proxy middleware
(deployments/ingress/proxy/front_door.py) and the simulator run the same code.

Why a concurrency limit: a request admitted while `limit` others are in flight waits behind
them; by Little's law the limit that keeps latency within the SLO is about throughput x SLO,
and both move with the machine's state (neighbours, the variants the policy picks). Nobody can
type that number into a config, so it is learned: every `window` completions, if more than
`max_late_share` of them were later than `late_fraction` of their SLO the limit shrinks by
`decrease`; if at most half that share was late and the limit was reached in the window it
grows by max(1, `increase` x limit) (additive-or-proportional increase, multiplicative
decrease, as TCP and Envoy's adaptive concurrency do). One late answer in a window must not
shrink the limit (a neighbour's burst, a GC pause): the share tolerated is what the SLO target
(>= 95 % of admitted in time) leaves, with a margin.
A request beyond the limit is refused at once: it costs the proxy one JSON answer instead of
the whole stack's time, so refusals stay cheap when offered load is many times capacity.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LimiterSettings:
    initial_limit: int = 16
    min_limit: int = 1
    max_limit: int = 1024
    # later than this share of its SLO: a late completion. Well below 1, so the limit holds
    # the stack's queue short enough that the ingress's own deadline check (the second line)
    # almost never refuses a request after it queued (those 429s came after 100-700 ms)
    late_fraction: float = 0.6
    max_late_share: float = 0.04  # of a window's completions, before the limit shrinks
    decrease: float = 0.9  # the limit's factor when a window was late
    increase: float = 0.1  # a clean saturated window adds max(1, increase x limit)
    window: int = 50  # completions per adjustment
    # a late window shrinks the limit only if the requests in flight reached this share of it
    # during the window: lateness with few in flight is the machine's (a neighbour, a pause),
    # not the queue's, and a smaller limit would only refuse the next burst (0: any late window)
    busy_fraction: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.min_limit <= self.initial_limit <= self.max_limit:
            raise ValueError("need 1 <= min_limit <= initial_limit <= max_limit")
        if not (0 < self.decrease < 1 and self.late_fraction > 0 and self.window >= 1):
            raise ValueError("need 0 < decrease < 1, late_fraction > 0, window >= 1")
        if not 0 <= self.busy_fraction <= 1:
            raise ValueError("need 0 <= busy_fraction <= 1")


class ConcurrencyLimiter:
    """One family's limit and in-flight count (one event loop: no locking)."""

    def __init__(self, settings: LimiterSettings) -> None:
        self.settings = settings
        self.limit = float(settings.initial_limit)
        self.inflight = 0
        self.done = 0
        self.late = 0
        self.saturated = False
        self.refused = 0
        self.peak = 0  # the most in flight during the window

    def try_acquire(self) -> bool:
        """Admit one request (the caller must `release` it) or refuse it."""
        if self.inflight >= int(self.limit):
            self.saturated = True
            self.refused += 1
            return False
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        return True

    def release(self, latency_s: float, slo_s: float | None, failed: bool = False) -> None:
        """A request admitted earlier has been answered after `latency_s` (its SLO `slo_s`,
        None when unknown); `failed`: it was not answered in time (deadline_exceeded, 5xx)."""
        self.inflight = max(self.inflight - 1, 0)
        self.done += 1
        s = self.settings
        if failed or (slo_s is not None and latency_s > s.late_fraction * slo_s):
            self.late += 1
        if self.done >= s.window:
            self._adjust()

    def _adjust(self) -> None:
        s = self.settings
        queued = self.peak >= s.busy_fraction * self.limit
        if self.late > s.max_late_share * self.done and queued:
            self.limit = max(float(s.min_limit), self.limit * s.decrease)
        elif self.saturated and self.late <= s.max_late_share * self.done / 2:
            self.limit = min(float(s.max_limit), self.limit + max(1.0, s.increase * self.limit))
        self.done = self.late = 0
        self.saturated = False
        self.peak = self.inflight
