"""A seeded, fluctuating Poisson trace like OTAS's synthetic workload (Fig. 8a).

The rate holds a level for 5-15 s, level = min_qps + (max_qps - min_qps) * U ** level_skew with
U uniform on [0, 1), with +-15% per-second jitter, clipped to [min_qps, max_qps].
`level_skew` 1 gives uniform levels (mean ~450 req/s on 200-700); `PAPER_LEVEL_SKEW` (3.5) gives a
mostly flat, low load with bursts (long-run mean ~312 req/s, 60% of seconds below 280 req/s),
matching the query count implied by the paper's utility total (see docs/otas.md); arrivals within each second are Poisson at that rate;
each query draws a type from the given query types uniformly. Each query also carries a uniform
`correct_draw`: it is answered correctly at a variant of accuracy a iff draw < a, so every
policy sees the same luck (common random numbers) and comparisons are less noisy.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from app.sim.otas.profile import QuerySpec
from policies.types import SLO, Request

PAPER_LEVEL_SKEW = 3.5


@dataclass(frozen=True)
class TraceQuery:
    request: Request
    correct_draw: float


def rate_per_second(duration_s: int, min_qps: float, max_qps: float,
                    rng: random.Random, level_skew: float = 1.0) -> list[float]:
    rates: list[float] = []
    while len(rates) < duration_s:
        level = min_qps + (max_qps - min_qps) * rng.random() ** level_skew
        for _ in range(rng.randint(5, 15)):
            jitter = rng.uniform(-0.15, 0.15)
            rates.append(min(max_qps, max(min_qps, level * (1.0 + jitter))))
    return rates[:duration_s]


def fluctuating_poisson_trace(duration_s: int, min_qps: float, max_qps: float, seed: int,
                              query_types: tuple[QuerySpec, ...],
                              level_skew: float = 1.0) -> tuple[TraceQuery, ...]:
    if duration_s < 1 or not 0 < min_qps <= max_qps or level_skew <= 0:
        raise ValueError("need duration_s >= 1, 0 < min_qps <= max_qps and level_skew > 0")
    rng = random.Random(seed)
    queries: list[TraceQuery] = []
    rates = rate_per_second(duration_s, min_qps, max_qps, rng, level_skew)
    for second, rate in enumerate(rates):
        t = float(second)
        while True:
            t += rng.expovariate(rate)
            if t >= second + 1:
                break
            spec = rng.choice(query_types)
            request = Request(len(queries), t, SLO(spec.latency_s, utility=spec.utility),
                              task=spec.task)
            queries.append(TraceQuery(request, rng.random()))
    return tuple(queries)
