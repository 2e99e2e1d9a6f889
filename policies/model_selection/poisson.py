"""Vectorized Poisson pmf/cdf tables (log-space, stable for means in the thousands)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.special import gammaln


def pmf_table(means: NDArray[Any], max_count: int) -> NDArray[Any]:
    """P[N = x] for N ~ Poisson(mean), shape (len(means), max_count + 1)."""
    x = np.arange(max_count + 1, dtype=float)
    mu = np.asarray(means, dtype=float)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        log_p = x * np.log(mu) - mu - gammaln(x + 1.0)
    out = np.exp(log_p)
    zero = (mu[:, 0] <= 0.0)
    if zero.any():
        out[zero] = 0.0
        out[zero, 0] = 1.0
    return out


def cdf_table(means: NDArray[Any], max_count: int) -> NDArray[Any]:
    """P[N <= x] for x = 0..max_count, clipped to [0, 1]."""
    return np.minimum(np.cumsum(pmf_table(means, max_count), axis=1), 1.0)
