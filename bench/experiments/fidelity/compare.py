"""One comparison of the simulator against the live server, for both paths: a `Comparison` is one
figure of one live run (classify: accuracy or violations of the items/requests; generation: the
P99 TTFT) beside the simulator's prediction of it, with the tolerance it is judged by. Every
target of `python -m bench fidelity` turns its rows into these, and its Result's checks are
theirs (`checks`), so the classify and the generation fidelity read the same way."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.core.result import Check
from bench.core.stats import percentile_or_nan

INF = float("inf")


@dataclass(frozen=True)
class Comparison:
    path: str  # "classify" | "generation"
    case: str  # which run: knob/state/load, system@rate, run name
    metric: str  # what was compared, with its unit
    live: float
    predicted: float
    tolerance: float  # |predicted - live| allowed: in the metric's unit, or x live if relative
    relative: bool = False
    calibration: bool = False  # the run the simulator was calibrated on: shown, never judged

    @property
    def error(self) -> float | None:
        """predicted - live (relative: as a fraction of live); None where either is infinite
        (saturated: >1% without a first token) or not a number."""
        if not all(math.isfinite(x) for x in (self.live, self.predicted)):
            return None
        d = self.predicted - self.live
        if self.relative:
            return d / self.live if self.live else None
        return d

    @property
    def ok(self) -> bool | None:
        """Within the tolerance; both saturated agrees; one saturated does not; None for the
        calibration run (it is fitted, not predicted)."""
        if self.calibration:
            return None
        if INF in (self.live, self.predicted):
            return self.live == self.predicted
        err = self.error
        return None if err is None else abs(err) <= self.tolerance

    @property
    def why(self) -> str:
        tol = f"{100 * self.tolerance:g}%" if self.relative else f"{self.tolerance:g}"
        if self.live == INF and self.predicted == INF:
            return "both saturated (>1% without a first token)"
        if self.live == INF:
            return "live saturated, sim not"
        if self.predicted == INF:
            return "sim saturated, live not"
        err = self.error
        return "not comparable" if err is None else (
            f"within {tol}" if abs(err) <= self.tolerance else f"outside {tol}")

    def check(self) -> Check:
        target = (f"|sim/live - 1| <= {self.tolerance:g}" if self.relative
                  else f"|sim - live| <= {self.tolerance:g}")
        value = {"live": self.live, "sim": self.predicted, "error": self.error}
        return Check(f"{self.path}/{self.case}/{self.metric}", value, target, self.ok)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "error": self.error, "ok": self.ok, "why": self.why}


def checks(rows: Iterable[Comparison]) -> list[Check]:
    return [r.check() for r in rows]


def table(rows: Sequence[Comparison]) -> str:
    """One line per comparison, and how many of the judged ones were within their tolerance."""
    lines = [f"{'case':<28}{'metric':<24}{'live':>10}{'sim':>10}{'error':>9}  verdict"]
    for r in rows:
        err = r.error
        err_s = "-" if err is None else (f"{100 * err:+.1f}%" if r.relative else f"{err:+.2f}")
        lines.append(f"{r.case:<28}{r.metric:<24}{r.live:>10.2f}{r.predicted:>10.2f}"
                     f"{err_s:>9}  {'(calibration) ' if r.calibration else ''}{r.why}")
    judged = [r for r in rows if r.ok is not None]
    saturated = sum(r.live == INF and r.predicted == INF for r in judged)
    lines.append(f"within tolerance: {sum(bool(r.ok) for r in judged)} of {len(judged)} judged"
                 + (f" ({saturated} of them: both saturated)" if saturated else ""))
    return "\n".join(lines)


def quantile(values: Any, q: float) -> float:
    """Nearest-rank q-quantile (q in 0..1), NaN for no values: bench.core.stats in fractions."""
    return percentile_or_nan((float(v) for v in values), 100.0 * q)


def p99_spread(values: list[float], draws: int = 500) -> list[float]:
    """5th and 95th percentile of the P99 over bootstrap resamples of the requests."""
    import numpy as np

    x = np.asarray(values, float)
    rng = np.random.default_rng(0)
    p99 = [quantile(x[rng.integers(0, x.size, x.size)], 0.99) for _ in range(draws)]
    return [quantile(p99, 0.05), quantile(p99, 0.95)]
