"""Decision cost of the OTAS allocators (Algorithm 2 and the exact one) on random heavily
loaded queues, and Algorithm 2's shortfall against the exact optimum (python -m bench otas)."""

from __future__ import annotations

import random
import statistics
import time
from typing import Any

from policies.tokens.api import (
    AllocationProblem,
    TokenProfile,
    allocate_alg2,
    allocate_exact,
)


def random_problem(profile: TokenProfile, rng: random.Random, num_batches: int) -> AllocationProblem:
    """A heavily loaded queue: deadlines within 1 s, batches of 1..64 queries of one task."""
    deadlines = tuple(sorted(rng.uniform(0.05, 1.0) for _ in range(num_batches)))
    gammas = range(len(profile.gammas))
    latency, utility = [], []
    for _ in range(num_batches):
        size, task = rng.randint(1, 64), rng.choice(profile.tasks)
        u = rng.choice([0.01, 0.2, 0.3, 1.0])
        latency.append(tuple(profile.batch_latency_s({task: size}, g) for g in gammas))
        utility.append(tuple(profile.expected_utility({task: size * u}, g) for g in gammas))
    return AllocationProblem(0.0, deadlines, tuple(latency), tuple(utility))


def decision_cost(profile: TokenProfile, trials: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    problems = [random_problem(profile, rng, 50) for _ in range(trials)]
    out: dict[str, Any] = {"num_batches": 50, "num_gammas": len(profile.gammas), "trials": trials}
    for name, fn in (("alg2", allocate_alg2), ("exact", allocate_exact)):
        wall, cpu = [], []
        for p in problems:
            start, start_cpu = time.perf_counter(), time.process_time()
            fn(p)
            wall.append((time.perf_counter() - start) * 1e3)
            cpu.append((time.process_time() - start_cpu) * 1e3)
        wall.sort()
        cpu.sort()
        p99 = min(len(wall) - 1, int(0.99 * len(wall)))
        out[name] = {"p50_ms": statistics.median(wall), "p99_ms": wall[p99], "max_ms": wall[-1],
                     "cpu_p50_ms": statistics.median(cpu), "cpu_p99_ms": cpu[p99]}
    gaps = []
    for p in problems:
        a, e = allocate_alg2(p).expected_utility, allocate_exact(p).expected_utility
        gaps.append((e - a) / e if e > 0 else 0.0)
    out["random_50x8_shortfall"] = {"short_fraction": sum(g > 1e-9 for g in gaps) / len(gaps),
                                    "mean_relative_gap": statistics.fmean(gaps),
                                    "max_relative_gap": max(gaps)}
    return out
