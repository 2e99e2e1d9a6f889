"""Arrival times shared by the live load generator and the scheduler simulator (same spec and
seed -> the very same arrivals in both).

- constant: evenly spaced at `qps`;
- poisson: Poisson arrivals at `qps`;
- twitter: RAMSIS's Twitter shape (one rate per second, Poisson inside each second), mapped
  linearly onto [qps, peak_qps] when `peak_qps` is given, else scaled so its mean is `qps`; read
  from the shared data directory the caller passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.traces.workloads import (
    constant_poisson,
    piecewise_poisson,
    rescaled_twitter_rates,
    twitter_rates_per_second,
)

TRACES = ("twitter", "poisson", "constant")


@dataclass(frozen=True)
class TraceSpec:
    kind: str
    qps: float
    duration_s: float
    peak_qps: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in TRACES:
            raise ValueError(f"unknown trace {self.kind!r}; valid: {list(TRACES)}")
        if self.qps <= 0 or self.duration_s <= 0:
            raise ValueError(f"need positive qps and duration, got {self.qps}, {self.duration_s}")
        if self.peak_qps is not None and self.peak_qps < self.qps:
            raise ValueError(f"peak_qps {self.peak_qps} below qps {self.qps}")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "qps": self.qps, "duration_s": self.duration_s,
                "peak_qps": self.peak_qps, "seed": self.seed}


def rates_per_second(spec: TraceSpec, data_dir: Path | None = None) -> NDArray[np.float64]:
    """The intended rate of each second of the run (constant for constant/poisson). The twitter
    shape is read from `data_dir`, the shared data directory."""
    seconds = max(1, math.ceil(spec.duration_s))
    if spec.kind != "twitter":
        return np.full(seconds, spec.qps)
    if data_dir is None:
        raise ValueError("the twitter trace needs data_dir, the shared data directory")
    if spec.peak_qps is not None:
        return np.asarray(rescaled_twitter_rates(data_dir, spec.qps, spec.peak_qps, seconds),
                          dtype=float)
    rates = np.asarray(twitter_rates_per_second(data_dir, seconds), dtype=float)
    return rates * (spec.qps / float(rates.mean()))


def arrival_times(spec: TraceSpec, data_dir: Path | None = None) -> NDArray[np.float64]:
    """Sorted send offsets (seconds from the start of the run), all below `duration_s`
    (`data_dir`: the shared data directory, read by the twitter trace only)."""
    if spec.kind == "constant":
        n = int(math.floor(spec.qps * spec.duration_s + 1e-9))
        return np.arange(n, dtype=float) / spec.qps
    if spec.kind == "poisson":
        arrivals = constant_poisson(spec.qps, spec.duration_s, spec.seed).arrivals_s
    else:
        rates = rates_per_second(spec, data_dir)
        arrivals = piecewise_poisson(rates, 1.0, spec.seed, "twitter").arrivals_s
    out = np.asarray(arrivals, dtype=float)
    return out[out < spec.duration_s]
