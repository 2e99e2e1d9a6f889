"""The serving stack's CPU in front of the replicas, measured live, as the simulator's front
stage (pure; the proxy's concurrency limit itself is `policies.admission`, run unchanged by
app/sim/replica/sim.py).

Live, every call costs CPU in each process of the stack (the Serve proxy, the ingress, the
classifier's decode and model, and the load generator on the same machine), and those processes
share the machine's few cores with each other and with whatever else runs there. So the
stack's time per call is not a constant: it grows with the call rate, and the rate the stack
can carry is where its CPU meets the cores left to it. The model:

- **The stack's busy cores are a line in the call rate** (`fit_stack_cpu`):
  busy = fixed + call_ms x admitted/s + refusal_ms x refused/s (ms of CPU per call), fitted by
  least squares to the runs of a live calibration (`CpuSample`: a run's CPU time of the Serve
  processes and the load generator, bench_front's `cpu_ms_per_call`, over its wall time).
  `fixed` is CPU spent whatever the rate (the controllers' loops, idle replicas) plus what
  batching amortizes (batches and coalesced calls grow with the rate, so the CPU per call
  falls with it, which a line with an intercept follows and a constant per call does not);
  `call_ms` is the CPU of one more admitted call, `refusal_ms` of one more refused call.
- **Neighbours** (everything else on the machine: other jobs, Ray's own daemons) take
  `neighbour_cores`, measured per run as the machine's CPU less the stack's.
- **The cores left, cores - neighbours - fixed, serve calls as one FIFO server** (parts.
  FrontStage) taking call_ms / left of time per admitted call (`front_ms_per_call`): at light
  load a call passes in that time, near capacity it queues, and the stack saturates where the
  fitted line meets the cores left. A refusal adds its refusal_ms / left of work to the server
  but is answered at once (the proxy refuses before the rest of the stack sees the call).

One server: the simplest queue with the capacity the CPU allows. What a call spends in the
stack at light load beyond its share of that server (network, gRPC, waiting on other processes'
turns) is a constant the caller measures at its lightest calibration run (the simulator's
`overhead_ms`). Checked against the live runs by bench/experiments/fidelity/classify/single_request.py. Not modelled: the
ingress's deadline admission (the second line of refusals, a fraction of a percent of the calls
live behind the proxy's limit) and Serve's `max_queued_requests` bound at the ingress.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

MIN_LEFT_CORES = 0.05  # cores left to the stack never below this (the fit or the neighbours
# can claim the whole machine; the stack then crawls instead of dividing by zero)


@dataclass(frozen=True)
class CpuSample:
    """One live run as the fit sees it: calls per second of its wall time and the stack's busy
    cores over it (CPU seconds per second)."""

    admitted_qps: float
    refused_qps: float
    busy_cores: float

    @classmethod
    def from_run(cls, cpu_ms_per_call: float, sent: int, admitted: int,
                 wall_s: float) -> CpuSample:
        """From a run's CPU ms per sent call (as bench_front records it), its sent and admitted
        calls and the load generator's wall time (the CPU window spans it, tail included)."""
        if wall_s <= 0 or sent < 0 or not 0 <= admitted <= sent:
            raise ValueError(f"need wall_s > 0 and 0 <= admitted <= sent, got {wall_s}, "
                             f"{admitted}, {sent}")
        return cls(admitted / wall_s, (sent - admitted) / wall_s,
                   cpu_ms_per_call * sent / wall_s / 1000.0)


@dataclass(frozen=True)
class StackCpu:
    """The fitted line (module doc) on a machine of `cores` cores."""

    cores: float
    fixed_cores: float
    call_ms: float
    refusal_ms: float

    def left_cores(self, neighbour_cores: float = 0.0) -> float:
        return max(self.cores - self.fixed_cores - neighbour_cores, MIN_LEFT_CORES)

    def front_ms_per_call(self, neighbour_cores: float = 0.0) -> float:
        """The front stage's time per admitted call with `neighbour_cores` taken by others."""
        return self.call_ms / self.left_cores(neighbour_cores)

    def front_ms_per_refusal(self, neighbour_cores: float = 0.0) -> float:
        return self.refusal_ms / self.left_cores(neighbour_cores)

    def capacity_qps(self, neighbour_cores: float = 0.0) -> float:
        """Admitted calls per second at which the stack's CPU fills the cores left to it."""
        return 1000.0 / self.front_ms_per_call(neighbour_cores)

    def busy_cores(self, admitted_qps: float, refused_qps: float = 0.0) -> float:
        """The fitted line."""
        return (self.fixed_cores + self.call_ms * admitted_qps / 1000.0
                + self.refusal_ms * refused_qps / 1000.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fit(adm: FloatArray, ref: FloatArray, y: FloatArray, intercept: bool,
         with_ref: bool) -> tuple[float, float, float]:
    """(fixed cores, cores per admitted call/s, cores per refused call/s) by least squares."""
    cols = ([np.ones_like(adm)] if intercept else []) + [adm] + ([ref] if with_ref else [])
    coef = [float(c) for c in np.linalg.lstsq(np.stack(cols, axis=1), y, rcond=None)[0]]
    fixed = coef.pop(0) if intercept else 0.0
    call = coef.pop(0)
    return fixed, call, (coef.pop(0) if with_ref else 0.0)


def fit_stack_cpu(samples: Sequence[CpuSample], cores: float) -> StackCpu:
    """Least squares of busy cores on (1, admitted/s, refused/s) over `samples`. The refusal
    column is left out (refusal_ms = 0) where no sample refused anything; a fit with a negative
    intercept or refusal cost (noise) is redone without that term."""
    if cores <= 0:
        raise ValueError(f"need cores > 0, got {cores}")
    adm = np.array([s.admitted_qps for s in samples], dtype=float)
    ref = np.array([s.refused_qps for s in samples], dtype=float)
    y = np.array([s.busy_cores for s in samples], dtype=float)
    if len(samples) < 2 or np.ptp(adm) <= 0:
        raise ValueError(f"need at least two samples at different admitted rates, got "
                         f"{[round(float(a), 2) for a in adm]}")
    with_ref = bool(np.any(ref > 0)) and len(samples) >= 3
    for intercept, refs in ((True, with_ref), (True, False), (False, with_ref), (False, False)):
        fixed, call, refusal = _fit(adm, ref, y, intercept, refs)
        if fixed >= 0 and refusal >= 0:
            break
    if call <= 0:
        raise ValueError("the busy cores do not grow with the admitted rate in these samples; "
                         "calibrate on runs that span a wider range of rates")
    return StackCpu(float(cores), fixed, 1000.0 * call, 1000.0 * refusal)
