"""The machine's cores shared by the live path's CPU work and the stages' own threads
(bench/experiments/fidelity/generation/live_path.py; docs/sim_generation.md, "Fidelity to the live system").

`processor_sharing` runs the requests' path CPU work on the host cores beside busy competitors.
`Occupancy` is how many of those requests' CPU work is present over time, and `StageContention`
turns it into how much longer than its profile a stage's step takes when it starts: the stage's
thread (vLLM's worker; an encoder replica) is one more runnable thread on the same cores, so it
progresses at min(1, cores / (1 + n(t) + others)) of a core, where n(t) is the path's CPU work
present and `others` the busy threads besides (other processes, the path's idle use; for an
encoder also vLLM's busy-polling engine). The step's whole duration is stretched by the rate at
its start (steps are milliseconds; the path's occupancy changes on the scale of a request's
path). First order: the stages' own compute is not fed back into the path's sharing (the engine's
measured cores are already there, as a competitor), and encoders do not slow each other.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

STAGES = ("llm", "encoder")


def processor_sharing(arrival_s: Sequence[float], work_s: Sequence[float], cores: float,
                      competitors: float = 0.0, threads: float = 0.0) -> NDArray[np.float64]:
    """Departure times of jobs on `cores` processor-shared cores that `competitors` always
    runnable threads (other processes) also want: with n jobs present, m = min(n, threads)
    of them run (`threads`: the processes the jobs' work runs in; 0: one thread per job), each
    thread at min(1, cores / (m + competitors)) of a core, their total shared by the n jobs.
    `cores` 0: no sharing (departure = arrival + work)."""
    arr = np.asarray(arrival_s, np.float64)
    work = np.asarray(work_s, np.float64)
    if cores <= 0:
        return arr + work
    order = np.argsort(arr, kind="stable")
    done = np.full(arr.size, np.nan)
    left: dict[int, float] = {}
    t, k = 0.0, 0
    while k < arr.size or left:
        rate = job_rate(len(left), cores, competitors, threads) if left else 0.0
        j = min(left, key=left.__getitem__) if left else -1
        t_done = t + left[j] / rate if left else math.inf
        t_next = float(arr[order[k]]) if k < arr.size else math.inf
        step = (min(t_done, t_next) - t) * rate
        for i in left:
            left[i] -= step
        if t_done <= t_next:
            t = t_done
            for i in [i for i, w in left.items() if w <= 1e-12 or i == j]:
                done[i] = t
                del left[i]
        else:
            t = t_next
            left[int(order[k])] = float(work[order[k]])
            k += 1
    return done


def running(n: int, threads: float) -> float:
    """Runnable threads of n jobs whose work runs in `threads` processes (0: unbounded)."""
    return float(n) if threads <= 0 else min(float(n), threads)


def job_rate(n: int, cores: float, competitors: float, threads: float = 0.0) -> float:
    """Each of n (>= 1) jobs' share of a core (processor_sharing)."""
    m = running(n, threads)
    return m * min(1.0, cores / (m + competitors)) / n


@dataclass(frozen=True)
class Occupancy:
    """A step function of time: `counts[j]` from `times[j]` until the next change point (0
    before the first)."""

    times: tuple[float, ...]
    counts: tuple[int, ...]

    @staticmethod
    def of(start_s: Sequence[float], end_s: Sequence[float]) -> Occupancy:
        """How many of the intervals [start, end) are open over time."""
        events = sorted([(float(t), 1) for t in start_s] + [(float(t), -1) for t in end_s])
        times: list[float] = []
        counts: list[int] = []
        n = 0
        for t, d in events:
            n += d
            if times and times[-1] == t:
                counts[-1] = n
            else:
                times.append(t)
                counts.append(n)
        return Occupancy(tuple(times), tuple(counts))

    def at(self, t: float) -> int:
        j = bisect.bisect_right(self.times, t) - 1
        return self.counts[j] if j >= 0 else 0


@dataclass(frozen=True)
class StageContention:
    """`stretch(stage, now_s)` for the simulator's stages (module docstring)."""

    host_cores: float
    occupancy: Occupancy
    background: float  # busy cores' worth besides the engine and the path's work
    engine_cores: float  # vLLM's engine (busy-polling): a competitor of the encoders
    path_threads: float = 0.0  # the processes the path's work runs in (0: one per request)

    def __post_init__(self) -> None:
        if not (self.host_cores > 0
                and min(self.background, self.engine_cores, self.path_threads) >= 0
                and math.isfinite(self.background + self.engine_cores + self.path_threads)):
            raise ValueError(f"host_cores must be > 0, the busy cores finite and >= 0: {self}")

    def __call__(self, stage: str, now_s: float) -> float:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; valid: {list(STAGES)}")
        threads = 1.0 + running(self.occupancy.at(now_s), self.path_threads) + self.background
        if stage == "encoder":
            threads += self.engine_cores
        return 1.0 / min(1.0, self.host_cores / threads)
