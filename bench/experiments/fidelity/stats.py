"""The fidelity figure's statistics (python -m bench fidelity-generation): quantiles of TTFTs with
infinities for requests without a first token, the live P99's bootstrap spread, the verdict."""

from __future__ import annotations

from typing import Any

from bench.core.stats import percentile_or_nan


def quantile(values: Any, q: float) -> float:
    """Nearest-rank q-quantile (q in 0..1), NaN for no values: bench.core.stats in fractions."""
    return percentile_or_nan((float(v) for v in values), 100.0 * q)


def p99_spread(ttft: list[float], draws: int = 500) -> list[float]:
    """5th and 95th percentile of the P99 over bootstrap resamples of the requests."""
    import numpy as np

    x = np.asarray(ttft, float)
    rng = np.random.default_rng(0)
    p99 = [quantile(x[rng.integers(0, x.size, x.size)], 0.99) for _ in range(draws)]
    return [quantile(p99, 0.05), quantile(p99, 0.95)]


def verdict(live: float, sim: float, tolerance: float = 0.2) -> tuple[float | None, str]:
    inf = float("inf")
    if live == inf and sim == inf:
        return None, "both saturated (>1% without a first token)"
    if live == inf:
        return None, "live saturated, sim not"
    if sim == inf:
        return None, "sim saturated, live not"
    err = (sim - live) / live
    return round(100 * err, 1), "within 20%" if abs(err) <= tolerance else "outside 20%"
