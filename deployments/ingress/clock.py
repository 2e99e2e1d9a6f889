"""Where a request's clock starts: the client's (or load balancer's) `X-Request-Start` when it
is believable, else the ingress handler's entry.

Time queued in front of the handler (the client's socket, the Serve proxy, the proxy's queue for
the ingress) is part of what the client waits, so the deadline and the answer's latency count
from the header's time. The header follows the load-balancer convention: `t=<seconds since the
epoch with a fraction>` (nginx, HAProxy), or a bare number in seconds, milliseconds or
microseconds (Heroku sends ms), told apart by magnitude. A value too far in the future (clock
skew beyond the bound) or too old is ignored, and counted, rather than trusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

HEADER = "x-request-start"
# Seconds since the epoch are ~1.8e9 today, ms ~1.8e12, us ~1.8e15: the magnitudes are 1e3 apart
# for centuries either way, so a split at 1e11 and 1e14 cannot mistake one unit for another.
MS_ABOVE = 1e11
US_ABOVE = 1e14


class StartSource(Enum):
    """Where an arrival time came from (`IGNORED_*`: a header was there but not believed)."""

    HEADER = "header"
    ENTRY = "entry"
    IGNORED_MALFORMED = "malformed"
    IGNORED_FUTURE = "future"
    IGNORED_STALE = "stale"

    @property
    def ignored(self) -> bool:
        return self in (StartSource.IGNORED_MALFORMED, StartSource.IGNORED_FUTURE,
                        StartSource.IGNORED_STALE)


@dataclass(frozen=True)
class Arrival:
    """A request's start: `time_s` is when its clock starts (wall-clock seconds), `entry_s` when
    the ingress handler began."""

    time_s: float
    entry_s: float
    source: StartSource

    @property
    def pre_ingress_s(self) -> float:
        """Time spent before the ingress handler (0 without a believed header; a header a little
        in the future, within the skew bound, counts as 0 rather than negative)."""
        return max(0.0, self.entry_s - self.time_s)


def parse_request_start(value: str) -> float | None:
    """Seconds since the epoch from a header value, or None when it is not a number."""
    text = value.strip()
    if text.startswith("t="):
        text = text[2:].strip()
    try:
        number = float(text)
    except ValueError:
        return None
    if number != number or number <= 0 or number == float("inf"):
        return None
    if number >= US_ABOVE:
        return number / 1e6
    if number >= MS_ABOVE:
        return number / 1e3
    return number


def arrival_from(header: str | None, entry_s: float, max_skew_s: float,
                 max_age_s: float) -> Arrival:
    """The request's arrival: the header's time when present and believable, else the entry.
    A header a little in the future (within `max_skew_s`) starts the clock at the entry."""
    if header is None:
        return Arrival(entry_s, entry_s, StartSource.ENTRY)
    start_s = parse_request_start(header)
    if start_s is None:
        return Arrival(entry_s, entry_s, StartSource.IGNORED_MALFORMED)
    if start_s > entry_s + max_skew_s:
        return Arrival(entry_s, entry_s, StartSource.IGNORED_FUTURE)
    if entry_s - start_s > max_age_s:
        return Arrival(entry_s, entry_s, StartSource.IGNORED_STALE)
    return Arrival(min(start_s, entry_s), entry_s, StartSource.HEADER)
