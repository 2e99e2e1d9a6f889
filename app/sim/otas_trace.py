"""A seeded, fluctuating Poisson trace like OTAS's synthetic workload (Fig. 8a).

The rate holds a level for 5-15 s (level uniform in [min_qps, max_qps]) with +-15% per-second
jitter, clipped to [min_qps, max_qps]; arrivals within each second are Poisson at that rate;
each query draws a type from the given query types uniformly. Each query also carries a uniform
`correct_draw`: it is answered correctly at a variant of accuracy a iff draw < a, so every
policy sees the same luck (common random numbers) and comparisons are less noisy.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from app.sim.otas_profile import QuerySpec
from policies.types import SLO, Request


@dataclass(frozen=True)
class TraceQuery:
    request: Request
    correct_draw: float


def rate_per_second(duration_s: int, min_qps: float, max_qps: float,
                    rng: random.Random) -> list[float]:
    rates: list[float] = []
    while len(rates) < duration_s:
        level = rng.uniform(min_qps, max_qps)
        for _ in range(rng.randint(5, 15)):
            jitter = rng.uniform(-0.15, 0.15)
            rates.append(min(max_qps, max(min_qps, level * (1.0 + jitter))))
    return rates[:duration_s]


def fluctuating_poisson_trace(duration_s: int, min_qps: float, max_qps: float, seed: int,
                              query_types: tuple[QuerySpec, ...]) -> tuple[TraceQuery, ...]:
    if duration_s < 1 or not 0 < min_qps <= max_qps:
        raise ValueError("need duration_s >= 1 and 0 < min_qps <= max_qps")
    rng = random.Random(seed)
    queries: list[TraceQuery] = []
    for second, rate in enumerate(rate_per_second(duration_s, min_qps, max_qps, rng)):
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
