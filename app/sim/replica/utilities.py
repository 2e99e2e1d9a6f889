"""Per-call utilities of a load (OTAS's utility of a correct answer within the deadline): a
cycle of values over call indices. One rule for the load generator (payload p carries call p's
utility; the payload count is a multiple of the cycle), the replica simulator (call c) and the
live bench's metrics (item i of calls of n items belongs to call i // n). Pure."""

from __future__ import annotations

from collections.abc import Sequence


def call_utility(call: int, utilities: Sequence[float]) -> float:
    """The utility of call `call`: the cycle's value, 1.0 (the API's default) without one."""
    return float(utilities[call % len(utilities)]) if utilities else 1.0


def check_utilities(utilities: Sequence[float]) -> None:
    """Utilities must be positive (the API refuses others)."""
    bad = [u for u in utilities if not u > 0]
    if bad:
        raise ValueError(f"utilities must be > 0, got {bad}")
