"""The statistics every experiment reports, one definition each.

Percentiles are nearest-rank: the P99 of 100 values is the 99th smallest, always an observed
value (so an infinity, a request with no answer, stays in the tail instead of being
interpolated away). `q` is in percent (0..100].
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank q-th percentile (q in 0..100); None for no values."""
    xs = sorted(values)
    if not xs:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(xs) - 1e-9))
    return xs[min(rank, len(xs)) - 1]


def percentile_or_nan(values: Iterable[float], q: float) -> float:
    """`percentile`, NaN for no values (for fields typed float)."""
    p = percentile(values, q)
    return math.nan if p is None else float(p)


def mean(values: Iterable[float]) -> float | None:
    xs = list(values)
    return sum(xs) / len(xs) if xs else None


def share_text(x: float | None) -> str:
    """A fraction as a percentage for tables: 0.987 -> '98.7%', None -> '-'."""
    return "-" if x is None else f"{100 * x:.1f}%"
