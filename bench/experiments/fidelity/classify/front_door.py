"""The live benchmark's third simulated source, "simfront": simcal's batch times
(app/sim/replica/served.py) behind the serving stack's front as bench_front's simulator models
it (app/sim/replica/front_door.py, calibrated as bench/experiments/fidelity/classify/single_request.py does; no second model):

- the front door: the proxy's per-family concurrency limit (`policies.admission`, run unchanged
  by app/sim/replica/sim.py) with the settings the live run's proxies had (the run's JSON
  "front_door"; a run from before it was recorded: the defaults). Only single requests pass
  it: the proxy limits `POST /v1/classify`, not `/v1/jobs`;
- the stack's CPU as one FIFO front stage: busy cores = fixed + call_ms x admitted calls/s +
  refusal_ms x refused calls/s (`fit_stack_cpu`), fitted to the CPU of the Serve processes and
  the load generator (`cpu_ms_per_call`) in **every static configuration's capacity ramp
  steps** that had room (the door refused under 5 %: past that the busy cores sit at the
  machine's ceiling, which those steps give instead, `usable_cores`), never in a run it predicts, less the model's own CPU (`ModelCpu`: its batches at
  the profile's p50, an idle core's time; the replicas' batch times model the model, and its
  CPU depends on the variants the policy picks, which the static ramps do not share). The
  front stage gets the machine's usable cores (`usable_cores`; older JSON `cpu_count`) less the fit's
  fixed cores, less what the predicted run's neighbours took (the machine's CPU less the
  stack's during that run: its machine state, an input like its trace, as front_sim.py) and
  less the model's CPU in the simulated run itself (`simulate_front`: a first pass from the
  calibration's loaded steps, then once more from the first pass's batches);
- the stack time a call spends outside the replica beyond its front-stage share (network,
  gRPC, other processes' turns): p50 at the lightest step of the best static configuration's
  ramp (front_sim.py's `hops_ms`; per call for jobs, `outside_replica_p50_ms`).

Jobs: every calibration run sends the same items per call, so CPU per call and per item
(decode) cannot be told apart; the fitted time per call of `job_size` items is the front
stage's time per call (`front_ms_per_item` stays 0).
Not modelled (front_door.py): the ingress's deadline admission (the second line of refusals;
for jobs the only one) and Serve's `max_queued_requests`.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.replica.config import SchedulerSimConfig
from app.sim.replica.front_door import CpuSample, fit_stack_cpu
from app.sim.replica.request_metrics import RequestRecord
from app.sim.replica.sim import SimRun, simulate
from bench.experiments.fidelity.classify.single_request import MACHINE, FrontCalibration
from policies.admission import ConcurrencyLimiter, LimiterSettings
from policies.profile import LatencyModel, Profile
from policies.schedulers.base import Scheduler

log = logging.getLogger(__name__)
FRONT_KIND = "simfront"
SATURATED_REFUSALS = 0.05  # a calibration run that refused this share was at the ceiling


class ModelCpu:
    """Cores the family's model takes in a run: the profile's p50 (an idle core) of each batch
    the records say ran (each item carries its batch's variant and size)."""

    def __init__(self, profile: Profile) -> None:
        self.model = LatencyModel.from_profile(profile, "p50")

    def cores(self, records: Sequence[RequestRecord], duration_s: float) -> float:
        busy_s = 0.0
        for r in records:
            if r.variant is None or not r.batch_size or r.variant not in self.model.names:
                continue
            busy_s += self.model.latency(self.model.index(r.variant), r.batch_size) / r.batch_size
        return busy_s / duration_s if duration_s > 0 else 0.0


@dataclass(frozen=True)
class RunCpu:
    """What one live run tells the front model: its calls, refused calls, wall time, CPU ms
    per call by process (MACHINE: the whole machine; the rest: the stack) and the cores its
    model took (`ModelCpu`)."""

    calls: float
    refused_calls: float
    wall_s: float
    cpu_ms: Mapping[str, float]
    model_cores: float = 0.0

    @classmethod
    def of(cls, records: Sequence[RequestRecord], job_size: int, wall_s: float,
           cpu_ms: Mapping[str, float], model: ModelCpu | None = None) -> RunCpu:
        """Calls of `job_size` items (a refused job is refused whole: its items all are)."""
        refused = sum(1 for r in records if r.outcome == "refused")
        return cls(len(records) / job_size, refused / job_size, wall_s, dict(cpu_ms),
                   0.0 if model is None else model.cores(records, wall_s))

    def stack_ms(self) -> float:
        return sum(v for k, v in self.cpu_ms.items() if k != MACHINE)

    def sample(self) -> CpuSample:
        """A sample for the fit: the stack's busy cores less the model's; admitted = not
        refused (a shed call crossed the stack)."""
        if self.wall_s <= 0:
            raise ValueError(f"a run without its wall time ({self.wall_s}) cannot be sampled")
        busy = self.stack_ms() * self.calls / self.wall_s / 1000.0
        return CpuSample((self.calls - self.refused_calls) / self.wall_s,
                         self.refused_calls / self.wall_s, max(busy - self.model_cores, 0.0))

    def saturated(self) -> bool:
        """The front door refused at least `SATURATED_REFUSALS` of the calls: the stack was full."""
        return self.calls > 0 and self.refused_calls / self.calls >= SATURATED_REFUSALS

    def machine_busy_cores(self) -> float:
        """Cores the whole machine was busy during the run (0 without a machine figure)."""
        if self.wall_s <= 0 or MACHINE not in self.cpu_ms:
            return 0.0
        return self.cpu_ms[MACHINE] * self.calls / self.wall_s / 1000.0

    def neighbour_cores(self) -> float:
        """Cores the rest of the machine took during the run (0 without a machine figure)."""
        if self.wall_s <= 0:
            return 0.0
        other_ms = self.cpu_ms.get(MACHINE, self.stack_ms()) - self.stack_ms()
        return max(0.0, other_ms * self.calls / self.wall_s / 1000.0)


def outside_replica_p50_ms(records: Sequence[RequestRecord]) -> float:
    """p50 over answered calls of the time outside the replica: latency less the span from the
    call's dispatch to the replica (its first item's) to the end of its last batch. For a
    single request that is front_sim's `stack_ms_p50` (latency - compute - (queue - dispatch));
    records without `dispatch_ms` (older runs) count from their batch's start instead."""
    spans: dict[str, tuple[float, float, float]] = {}  # call -> latency, start, end
    for i, r in enumerate(records):
        if (r.outcome != "ok" or r.latency_ms is None or r.queue_ms is None
                or r.compute_ms is None):
            continue
        key = r.job_id or f"item-{i}"
        start = r.dispatch_ms if r.dispatch_ms is not None else r.queue_ms
        end = r.queue_ms + r.compute_ms
        prev = spans.get(key)
        if prev is not None:
            start, end = min(prev[1], start), max(prev[2], end)
        spans[key] = (r.latency_ms, start, end)
    if not spans:
        raise ValueError("no ok answers with server timings to calibrate the stack time on")
    return float(np.median([lat - (end - start) for lat, start, end in spans.values()]))


def machine_cores(out: Mapping[str, Any]) -> float:
    """The cores the live run's machine had (older JSON: `cpu_count`; else this machine's)."""
    return float(out.get("machine_cores") or out.get("cpu_count") or os.cpu_count() or 1)


def usable_cores(out: Mapping[str, Any], runs: Sequence[RunCpu]) -> float:
    """The cores the stack can actually fill: the most the whole machine was busy in any
    calibration run, at most its nominal cores, where the ramp reached its knee (a run that
    is `saturated`). Live the machine never reaches its nominal cores (scheduling gaps
    between the stack's processes, the kernel's share: ~1.8-1.9 of 2 here), and a front stage
    handed the nominal cores over-predicts the saturated capacity by that gap. A ramp that
    stopped below its knee never showed the ceiling: the nominal cores then (and without
    machine figures)."""
    nominal = machine_cores(out)
    seen = [r.machine_busy_cores() for r in runs]
    if not any(r.saturated() for r in runs) or not seen or max(seen) <= 0:
        return nominal
    return min(nominal, max(seen))


def door_settings(out: Mapping[str, Any], job_size: int) -> LimiterSettings | None:
    """The proxy's limiter the run's calls passed: None for jobs (not limited); the recorded
    settings, or the defaults for a run from before bench_live recorded them."""
    if job_size > 1:
        return None
    recorded = out.get("front_door")
    return LimiterSettings(**recorded) if recorded else LimiterSettings()


def calibration_runs(out: Mapping[str, Any]) -> list[str]:
    """Every static configuration's capacity ramp steps (older JSON: the one ramp)."""
    st = out.get("statics") or {}
    ramps = ([c["ramp"] for c in st["capacity"].values()] if st.get("capacity")
             else [out["capacity"]["ramp"]])
    return [step.get("run", f"ramp_{i}") for ramp in ramps for i, step in enumerate(ramp)]


@dataclass(frozen=True)
class FrontModel:
    """What simfront adds to simcal's simulator config, per predicted run."""

    calibration: FrontCalibration
    door: LimiterSettings | None
    neighbour_cores: Mapping[str, float]  # by predicted run
    model_cores_guess: float = 0.0  # the model's cores in the calibration's loaded steps

    def config(self, base: SchedulerSimConfig, run: str,
               model_cores: float = 0.0) -> SchedulerSimConfig:
        """`base` with the front stage, its door and hops; the stage's cores are what the
        run's neighbours and the model (`model_cores`) leave."""
        nbr, stack = self.neighbour_cores.get(run, 0.0) + model_cores, self.calibration.stack
        return replace(base, overhead_ms=self.calibration.hops_ms,
                       front_ms_per_call=stack.front_ms_per_call(nbr),
                       front_ms_per_refusal=stack.front_ms_per_refusal(nbr),
                       front_ms_per_item=0.0, front_door=self.door)

    def to_dict(self) -> dict[str, Any]:
        st = self.calibration.stack
        return {**self.calibration.to_dict(),
                "front_door": None if self.door is None else asdict(self.door),
                "neighbour_cores": dict(self.neighbour_cores),
                "model_cores_guess": self.model_cores_guess,
                "front_ms_per_call_without_model": {n: st.front_ms_per_call(c)
                                                    for n, c in self.neighbour_cores.items()}}


@dataclass(frozen=True)
class FrontRuns:
    """The live runs simfront reads: CPU figures and records by run name, the lightest step
    of the best static configuration's ramp, its loaded steps (simcal's calibration runs), and
    the runs it predicts."""

    cpu: Mapping[str, RunCpu]
    records: Mapping[str, Sequence[RequestRecord]]
    light_run: str
    loaded_runs: Sequence[str]
    predicted: Sequence[str]


def front_model(out: Mapping[str, Any], runs: FrontRuns, job_size: int,
                served_records: list[RequestRecord]) -> FrontModel:
    """The fit on the calibration runs (`calibration_runs`), the stack time beyond the front
    stage at the light run, and each predicted run's neighbours (module doc)."""
    cpu = runs.cpu
    names = [n for n in calibration_runs(out) if n in cpu and n not in runs.predicted]
    # the line is the stack's demand: fitted where the machine had room (nothing much refused);
    # at the saturated steps the busy cores sit at the machine's ceiling whatever the calls,
    # which the line would read as a cost of refusals (3.4 ms each in one fit; the live
    # runs at 2x show ~0.3 ms: the proxy's answer and the load generator's). The saturated
    # steps give the ceiling instead (`usable_cores`).
    # (Below the knee the few refusals cannot be told from noise either: a fit on them once
    # read 89 ms per refusal. They are left out of the line there, refusal_ms = 0.)
    room = [replace(cpu[n].sample(), refused_qps=0.0) for n in names if not cpu[n].saturated()]
    samples = (room if len({round(x.admitted_qps, 1) for x in room}) >= 2
               else [cpu[n].sample() for n in names])
    stack = fit_stack_cpu(samples, usable_cores(out, [cpu[n] for n in names]))
    light = cpu[runs.light_run]
    hops_ms = max(0.0, outside_replica_p50_ms(runs.records[runs.light_run])
                  - stack.front_ms_per_call(light.neighbour_cores() + light.model_cores))
    loaded = [cpu[n].model_cores for n in runs.loaded_runs if n in cpu]
    cal = FrontCalibration(stack, hops_ms, names, served_records)
    return FrontModel(cal, door_settings(out, job_size),
                      {n: cpu[n].neighbour_cores() for n in runs.predicted if n in cpu},
                      float(np.mean(loaded)) if loaded else 0.0)


def try_front_model(out: Mapping[str, Any], runs: FrontRuns, job_size: int,
                    served_records: list[RequestRecord]) -> FrontModel | None:
    """`front_model`, or None (simfront skipped, said in the log) where the run cannot give one:
    no CPU figures or wall times (older runs), a flat fit."""
    try:
        return front_model(out, runs, job_size, served_records)
    except (KeyError, ValueError) as exc:
        log.warning("no %s: %s", FRONT_KIND, exc)
        return None


@dataclass(frozen=True)
class FrontSim:
    """One simfront simulation's inputs besides the model: the run, its arrivals, config and
    the batch times' factory (one fresh `ServedTimes` per pass)."""

    run: str
    profile: Profile
    make_scheduler: Callable[[int], Scheduler]
    arrivals_s: NDArray[Any]
    duration_s: float
    config: SchedulerSimConfig
    service_times: Callable[[], Callable[[str, int], float]]


def simulate_front(front: FrontModel, model: ModelCpu, s: FrontSim,
                   door: ConcurrencyLimiter | None = None) -> tuple[SimRun, float]:
    """The run behind the front stage whose cores the model's CPU shares: first with the model's
    cores of the calibration's loaded steps, then with those of the first pass's batches.
    Each pass starts from a copy of `door` (the limiter the previous run left; None: a fresh
    one). Returns the second pass (its `door`: the limiter it left) and the model cores it
    assumed."""
    def run(model_cores: float) -> SimRun:
        return simulate(s.profile, s.make_scheduler, s.arrivals_s, s.duration_s,
                        front.config(s.config, s.run, model_cores),
                        service_times=s.service_times(), door=copy.deepcopy(door))

    first = run(front.model_cores_guess)
    used = model.cores(first.records, s.duration_s)
    return run(used), used
