"""Load-granular baselines of RAMSIS §7 and the trivial ones.

Jellyfish+: for the anticipated load, the most accurate model that has a batch size b with
latency <= SLO/2 and throughput b / l(m, b) >= 1.05 x per-worker load; workers pull up to that b
from a central queue (adaptive batching). ModelSwitching: the most accurate model whose p99
response latency under the anticipated load, measured by our simulator, is within the SLO
(calibrated in app.sim.ramsis.calibration); same central queue and batching.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from policies.model_selection.api import Choice, WorkerView
from policies.profile import LatencyModel

JELLYFISH_HEADROOM = 1.05


@dataclass(frozen=True)
class StaticChoice:
    """One load-granular decision: a model and the largest batch a worker takes."""

    load_qps: float
    variant_index: int
    max_batch_size: int


def max_feasible_batch(model: LatencyModel, index: int, slo_s: float, per_worker_qps: float,
                       headroom: float, max_batch_size: int) -> int:
    """Largest b with l(m,b) <= SLO/2 and b / l(m,b) >= headroom x per-worker load (0: none)."""
    best = 0
    for b in range(1, max_batch_size + 1):
        lat = model.latency(index, b)
        if lat <= slo_s / 2 and b / lat >= headroom * per_worker_qps:
            best = b
    return best


def jellyfish_choice(model: LatencyModel, slo_s: float, num_workers: int, load_qps: float,
                     max_batch_size: int = 32) -> StaticChoice:
    per_worker = load_qps / num_workers
    best: StaticChoice | None = None
    for i in range(len(model.names)):
        b = max_feasible_batch(model, i, slo_s, per_worker, JELLYFISH_HEADROOM, max_batch_size)
        if b and (best is None or model.accuracy[i] > model.accuracy[best.variant_index]):
            best = StaticChoice(load_qps, i, b)
    return best or StaticChoice(load_qps, model.fastest(), max_batch_size)


def adaptive_batch_cap(model: LatencyModel, index: int, slo_s: float, per_worker_qps: float,
                       max_batch_size: int = 32) -> int:
    """ModelSwitching's batch cap for a static model: the Jellyfish rule without headroom, else
    the largest batch within SLO/2, else 1."""
    b = max_feasible_batch(model, index, slo_s, per_worker_qps, 1.0, max_batch_size)
    if b:
        return b
    fits = [b for b in range(1, max_batch_size + 1) if model.latency(index, b) <= slo_s / 2]
    return max(fits) if fits else 1


class LoadGranularPolicy:
    """One (model, max batch) per anticipated load; lowest covering load wins, as for RAMSIS."""

    def __init__(self, name: str, choices: list[StaticChoice]) -> None:
        if not choices:
            raise ValueError(f"{name}: need at least one load")
        self.name = name
        self.choices = sorted(choices, key=lambda c: c.load_qps)
        self.loads = [c.load_qps for c in self.choices]

    def choice_for(self, load_qps: float) -> StaticChoice:
        i = bisect.bisect_left(self.loads, load_qps)
        return self.choices[min(i, len(self.choices) - 1)]

    def choose(self, view: WorkerView) -> Choice:
        c = self.choice_for(view.load_qps)
        return Choice(c.variant_index, min(view.queue_length, c.max_batch_size))


class FixedPolicy:
    """Always one variant, adaptive batching up to `max_batch_size`."""

    def __init__(self, name: str, variant_index: int, max_batch_size: int) -> None:
        self.name = name
        self.variant_index = variant_index
        self.max_batch_size = max_batch_size

    def choose(self, view: WorkerView) -> Choice:
        return Choice(self.variant_index, min(view.queue_length, self.max_batch_size))


def always_fastest(model: LatencyModel, max_batch_size: int = 32) -> FixedPolicy:
    return FixedPolicy("fastest", model.fastest(), max_batch_size)


def always_most_accurate(model: LatencyModel, max_batch_size: int = 32) -> FixedPolicy:
    return FixedPolicy("most_accurate", model.most_accurate(), max_batch_size)
