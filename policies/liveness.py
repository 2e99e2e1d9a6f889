"""Whether a model family has a live replica, as one ingress replica believes it: a small state
machine fed by probes (a cheap call to every running replica of the family) and by how the
request path's calls end. Pure: the ingress's shell (deployments/ingress/health.py) sends the
probes, reads the clock and refuses the requests.

| state    | entered when | requests |
|----------|--------------|----------|
| starting | the ingress started; no probe has been conclusive yet (no running replica is not conclusive for `start_grace_s`: Serve is building them) | pass (wait for a replica) |
| up       | a probe reached >= 1 replica, or a replica answered a request | pass |
| suspect  | a request call to the family failed (a replica may have died): probe at once | pass |
| down     | a probe found no running replica, or every replica it called failed (dead); or suspect lasted `suspect_max_s` with no answer | refused at once: 503 `unavailable` + Retry-After |

A probe with no answer within `probe_timeout_s` says replicas exist but are busy: a saturated
family is overloaded, not down (admission answers that with 429), so the state stays (only a
suspect family that stays silent for `suspect_max_s` goes down). Probes go out every
`probe_period_s` while up or starting, sooner when a request call has waited `slow_call_s`
without an answer (a killed replica with nothing in flight fails no call: Serve's router just
waits for another), and every `down_probe_period_s` while suspect or down, never more often
than that; so a replaced replica is seen within about that time (sooner when a request it answers comes
back first: that answer lifts `down` too, and a probe confirms at once).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum


class Health(Enum):
    STARTING = "starting"
    UP = "up"
    SUSPECT = "suspect"
    DOWN = "down"


@dataclass(frozen=True)
class LivenessSettings:
    probe_period_s: float = 2.0  # between probes while up or starting
    down_probe_period_s: float = 0.5  # between probes while suspect or down
    probe_timeout_s: float = 1.0  # a probe without an answer by then is inconclusive
    suspect_max_s: float = 3.0  # suspect this long without any answer: down
    slow_call_s: float = 0.25  # a request call unanswered this long asks for a probe
    retry_after_s: int = 1  # the refusals' Retry-After (whole seconds)
    start_grace_s: float = 300.0  # starting: no running replica this long after start is down

    def __post_init__(self) -> None:
        if min(self.probe_period_s, self.down_probe_period_s, self.probe_timeout_s,
               self.suspect_max_s, self.slow_call_s,
               self.start_grace_s) <= 0 or self.retry_after_s < 1:
            raise ValueError("liveness periods and timeouts must be > 0 and retry_after_s >= 1")


@dataclass(frozen=True)
class ProbeResult:
    """One probe of every running replica: how many answered, how many calls failed (the
    replica is dead or unreachable), whether it gave up waiting, and why none answered."""

    answered: int
    failed: int = 0
    timed_out: bool = False
    error: str = ""


@dataclass(frozen=True)
class FamilyHealth:
    state: Health
    since_s: float  # when the state began
    next_probe_s: float
    live_replicas: int | None = None  # replicas the last conclusive probe reached (None: never)
    reason: str = ""  # why it is suspect or down
    probed_s: float = float("-inf")  # when the last probe came back

    @property
    def refuses(self) -> bool:
        """Requests for the family are refused at once (503 unavailable)."""
        return self.state is Health.DOWN

    @property
    def healthy(self) -> bool:
        """A replica has answered and none is known lost since (up or suspect)."""
        return self.state in (Health.UP, Health.SUSPECT)


def starting(now_s: float) -> FamilyHealth:
    """A family as the ingress starts: probe at once."""
    return FamilyHealth(Health.STARTING, now_s, now_s)


def _move(h: FamilyHealth, state: Health, now_s: float, next_probe_s: float,
          live: int | None, reason: str) -> FamilyHealth:
    since_s = h.since_s if state is h.state else now_s
    return FamilyHealth(state, since_s, next_probe_s, live, reason, h.probed_s)


def after_probe(h: FamilyHealth, result: ProbeResult, now_s: float,
                s: LivenessSettings) -> FamilyHealth:
    return replace(_probed(h, result, now_s, s), probed_s=now_s)


def _probed(h: FamilyHealth, result: ProbeResult, now_s: float,
            s: LivenessSettings) -> FamilyHealth:
    if result.answered > 0:
        why = f"{result.failed} replica(s) failed the probe" if result.failed else ""
        return _move(h, Health.UP, now_s, now_s + s.probe_period_s, result.answered, why)
    if result.timed_out:
        if h.state is Health.SUSPECT and now_s - h.since_s >= s.suspect_max_s:
            return _move(h, Health.DOWN, now_s, now_s + s.down_probe_period_s, 0,
                         f"no replica answered for {now_s - h.since_s:.1f} s ({h.reason})")
        fast = h.state in (Health.SUSPECT, Health.DOWN, Health.STARTING)
        period = s.down_probe_period_s if fast else s.probe_period_s
        return replace(h, next_probe_s=now_s + period)
    why = result.error or f"all {result.failed} replica(s) failed the probe"
    if (h.state is Health.STARTING and result.failed == 0
            and now_s - h.since_s < s.start_grace_s):
        # no replica running yet: Serve is still building them (constructors take tens of
        # seconds on a busy node); requests wait for one, as before any probe
        return replace(h, next_probe_s=now_s + s.down_probe_period_s, reason=why)
    return _move(h, Health.DOWN, now_s, now_s + s.down_probe_period_s, 0, why)


def after_call_failed(h: FamilyHealth, reason: str, now_s: float) -> FamilyHealth:
    """A request call to the family raised (not a timeout): suspect it and probe now."""
    if h.state in (Health.UP, Health.STARTING):
        return _move(h, Health.SUSPECT, now_s, now_s, h.live_replicas, reason)
    return h


def after_slow_call(h: FamilyHealth, now_s: float, s: LivenessSettings) -> FamilyHealth:
    """A request call has waited `slow_call_s` without an answer: probe soon (at most one
    probe per `down_probe_period_s`; suspect and down already probe that often)."""
    if h.state not in (Health.UP, Health.STARTING):
        return h
    due_s = max(now_s, h.probed_s + s.down_probe_period_s)
    return h if due_s >= h.next_probe_s else replace(h, next_probe_s=due_s)


def after_answer(h: FamilyHealth, now_s: float) -> FamilyHealth:
    """A replica answered a request call: the family has a live replica. Lifting `down` this
    way is confirmed by a probe at once (the answer may have left before the replica died)."""
    if h.state is Health.UP:
        return h
    live = max(h.live_replicas or 0, 1)
    return _move(h, Health.UP, now_s, min(h.next_probe_s, now_s), live, "")
