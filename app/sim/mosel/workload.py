"""MOSEL workload: a Twitter-shaped QPS curve, Poisson job arrivals, seeded job draws.

Paper (section 7.1): the Twitter trace is mapped to a minimum of 5 QPS and a maximum of twice
the model's all-modality capacity; each job gets an accuracy SLO within the model's range.
Where the paper is silent (documented in docs/mosel.md): job sizes are log-uniform on
1..max_job_size (many small jobs, some large), and each job's latency SLO is its all-modality
service time alone on a worker plus a uniform queueing allowance.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from app.sim.traces.workloads import load_twitter_steps
from policies.types import SLO, Job


@dataclass(frozen=True)
class WorkloadSpec:
    """How jobs are drawn. Accuracy SLOs are uniform on [min_accuracy, max_accuracy]."""

    min_qps: float
    peak_qps: float
    min_accuracy: float
    max_accuracy: float
    max_job_size: int = 64
    queue_allowance_min_s: float = 0.5
    queue_allowance_max_s: float = 2.0
    step_s: float = 10.0


def load_trace_shape(data_dir: Path) -> list[float]:
    """The Twitter trace's QPS values, one per 10-s step, from the shared data directory."""
    values = [float(v) for v in load_twitter_steps(data_dir)]
    if len(values) < 2:
        raise ValueError(f"the Twitter trace under {data_dir} has fewer than two steps")
    return values


def rescale(shape: list[float], min_qps: float, peak_qps: float) -> list[float]:
    """Linear map of the shape onto [min_qps, peak_qps]."""
    lo, hi = min(shape), max(shape)
    span = hi - lo if hi > lo else 1.0
    return [min_qps + (v - lo) / span * (peak_qps - min_qps) for v in shape]


def job_size_pmf(max_job_size: int) -> list[float]:
    """P(n) for n = 1..max: n = floor(exp(U(0, ln(max + 1)))) (log-uniform)."""
    total = math.log(max_job_size + 1)
    return [math.log((n + 1) / n) / total for n in range(1, max_job_size + 1)]


def mean_job_size(max_job_size: int) -> float:
    return sum(n * p for n, p in enumerate(job_size_pmf(max_job_size), start=1))


def draw_job_size(rng: random.Random, max_job_size: int) -> int:
    n = int(math.exp(rng.uniform(0.0, math.log(max_job_size + 1))))
    return min(max(n, 1), max_job_size)


def generate_jobs(spec: WorkloadSpec, qps_steps: list[float], solo_latency_s: list[float],
                  rng: random.Random) -> list[Job]:
    """Jobs in arrival order. `solo_latency_s[n - 1]` is the all-modality time of a job of n."""
    jobs: list[Job] = []
    mean_n = mean_job_size(spec.max_job_size)
    for step, qps in enumerate(qps_steps):
        t0 = step * spec.step_s
        t = t0 + rng.expovariate(qps / mean_n)
        while t < t0 + spec.step_s:
            n = draw_job_size(rng, spec.max_job_size)
            allowance = rng.uniform(spec.queue_allowance_min_s, spec.queue_allowance_max_s)
            slo = SLO(latency_s=solo_latency_s[n - 1] + allowance,
                      min_accuracy=rng.uniform(spec.min_accuracy, spec.max_accuracy))
            jobs.append(Job(len(jobs), t, slo, n))
            t += rng.expovariate(qps / mean_n)
    return jobs
