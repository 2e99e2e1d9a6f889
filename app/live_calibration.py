"""Service-time calibration for the live benchmark's simulator: how much slower the model runs
in the serving stack than in the profile (measured alone on an idle core).

On a shared 2-core machine the replica's model thread competes with the proxy, ingress,
preprocess, Ray's own processes and the load generator; at the top of the capacity ramp batches
take 1.2-1.5x their profiled time. `contention_factor` measures that slowdown from one live run's
records, `scaled_profile` applies it to every variant, so a simulator can be calibrated on one run
(the static configuration at its capacity) and predict others.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from app.sim.request_metrics import RequestRecord
from policies.profile import LatencyPoint, Profile


def contention_factor(records: Iterable[RequestRecord], profile: Profile) -> float:
    """Median over answered items of live compute time / profiled p50 at the same (variant,
    batch size); 1.0 when no batch size matches a profiled point."""
    p50 = {(v.variant.name, p.batch_size): p.p50_ms for v in profile.variants for p in v.latency}
    ratios = [r.compute_ms / p50[(r.variant, r.batch_size)] for r in records
              if r.compute_ms is not None and r.variant is not None
              and r.batch_size is not None and (r.variant, r.batch_size) in p50]
    return float(np.median(ratios)) if ratios else 1.0


def scaled_profile(profile: Profile, factor: float) -> Profile:
    """Every latency point of every variant times `factor` (accuracy unchanged)."""
    if factor <= 0:
        raise ValueError(f"factor must be positive, got {factor}")

    def scale(p: LatencyPoint) -> LatencyPoint:
        return replace(p, p50_ms=p.p50_ms * factor, p95_ms=p.p95_ms * factor,
                       p99_ms=p.p99_ms * factor, mean_ms=p.mean_ms * factor)

    variants = tuple(replace(v, latency=tuple(scale(p) for p in v.latency))
                     for v in profile.variants)
    return replace(profile, variants=variants,
                   metadata={**profile.metadata, "contention_factor": factor})
