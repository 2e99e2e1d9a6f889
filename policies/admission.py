"""A concurrency limit per model family at the front door (the Serve proxy), set by AIMD on the
latency clients see: the arithmetic only, so the proxy middleware
(deployments/ingress/proxy/front_door.py) and the simulator run the same code.

Why a concurrency limit: a request admitted while `limit` others are in flight waits behind
them; by Little's law the limit that keeps latency within the SLO is about throughput x SLO,
and both move with the machine's state (neighbours, the variants the policy picks). Nobody can
type that number into a config, so it is learned: every `window` completions, if more than
`max_late_share` of them were late (below) the limit shrinks by `decrease`; if at most half
that share was late and the limit was reached in the window it grows by max(1, `increase` x
limit) (additive-or-proportional increase, multiplicative decrease, as TCP and Envoy's
adaptive concurrency do). One late answer in a window must not
shrink the limit (a neighbour's burst, a GC pause): the share tolerated is what the SLO target
(>= 95 % of admitted in time) leaves, with a margin.
A request beyond the limit is refused at once: it costs the proxy one JSON answer instead of
the whole stack's time, so refusals stay cheap when offered load is many times capacity.

Late means past `late_fraction` of the slack the SLO leaves above the family's unloaded latency:
past base + late_fraction x (SLO - base), base the least latency of the last `base_samples`
answers to requests admitted alone (nothing else of the family in flight; under a sustained
overload none is, so the base kept is the one measured before it, and a door that never saw an
unloaded answer judges by the SLO alone: base 0).
Measured against the SLO alone (late past 0.6 x SLO), a family whose model takes half the SLO
unloaded (a 60-90 ms ViT under a 200 ms SLO) was late as soon as one request waited behind
another: the limit fell to 1, the path's work could no longer overlap the model's, and under
overload the family served 55-80% of the capacity its own ramp measured, while its policy, shown
a queue of one, never degraded (the door dropped instead). For light families (base ~20 ms) the
threshold is about what it was (128 ms instead of 120 at a 200 ms SLO).

A family whose policy degrades (RAMSIS, OTAS, MOSEL: the scheduler registry's `degrades`; the
ingress says so on each answer, the simulator knows its scheduler) is judged against
`degrading_late_fraction` of the slack instead: such a policy plans each batch to its deadline,
spending the slack on accuracy while the queue is short and trading accuracy for time as it
grows, so an answer at 0.7 of the slack is the policy at work, not congestion. Judged at 0.6,
the door shrank the limit before any queue formed and the policy never saw the load it degrades
for (RAMSIS on the ladder at 2x the most accurate variant's capacity: 1.07x its goodput at 0.6,
1.85x at 0.9, 99.3% of admitted in time; docs/live.md). A static family keeps 0.6: for it a late
answer only means a longer queue, which the ingress would refuse after it waited.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class LimiterSettings:
    initial_limit: int = 16
    min_limit: int = 1
    max_limit: int = 1024
    # later than base + this share of (SLO - base), base the unloaded latency: a late
    # completion. Well below 1, so the limit holds the stack's queue short enough that the
    # ingress's own deadline check (the second line) almost never refuses a request after it
    # queued (those 429s came after 100-700 ms)
    late_fraction: float = 0.6
    degrading_late_fraction: float = 0.9  # the same, for a family whose policy degrades
    base_samples: int = 256  # answers whose least latency is the unloaded latency (0: base 0)
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
        if not (0 < self.decrease < 1 and self.late_fraction > 0
                and self.degrading_late_fraction > 0 and self.window >= 1):
            raise ValueError("need 0 < decrease < 1, late_fraction > 0, "
                             "degrading_late_fraction > 0, window >= 1")
        if not 0 <= self.busy_fraction <= 1:
            raise ValueError("need 0 <= busy_fraction <= 1")
        if self.base_samples < 0:
            raise ValueError("need base_samples >= 0")


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
        self.degrades = False  # the family's policy degrades (as its last answer said)
        self._answered: deque[float] = deque(maxlen=settings.base_samples)

    @property
    def base_s(self) -> float:
        """The unloaded latency: the least of the last `base_samples` unloaded answers' latency
        (0 before any)."""
        return min(self._answered) if self._answered else 0.0

    @property
    def unloaded_answers(self) -> int:
        """Unloaded answers the base is taken over now (at most `base_samples`)."""
        return len(self._answered)

    def late_after_s(self, slo_s: float) -> float:
        """A completion later than this is late: base + late_fraction x (SLO - base)
        (`degrading_late_fraction` for a family whose policy degrades)."""
        base = self.base_s
        s = self.settings
        fraction = s.degrading_late_fraction if self.degrades else s.late_fraction
        return base + fraction * (slo_s - base)

    def try_acquire(self) -> bool:
        """Admit one request (the caller must `release` it) or refuse it."""
        if self.inflight >= int(self.limit):
            self.saturated = True
            self.refused += 1
            return False
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        return True

    def release(self, latency_s: float, slo_s: float | None, failed: bool = False,
                unloaded: bool = False, degrades: bool | None = None) -> None:
        """A request admitted earlier has been answered after `latency_s` (its SLO `slo_s`,
        None when unknown); `failed`: it was not answered in time (deadline_exceeded, 5xx);
        `unloaded`: a 2xx answer to a request admitted alone (`try_acquire` left `inflight` at
        1), so its latency is the unloaded one (a 4xx or a failure says nothing of a model run);
        `degrades`: whether the family's policy degrades, as the answer says (None: it does not
        say; the last word stands)."""
        if degrades is not None:
            self.degrades = degrades
        self.inflight = max(self.inflight - 1, 0)
        self.done += 1
        s = self.settings
        late = failed or (slo_s is not None and latency_s > self.late_after_s(slo_s))
        if unloaded and not failed:  # (base_samples 0: the deque keeps nothing)
            self._answered.append(latency_s)
        if late:
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
