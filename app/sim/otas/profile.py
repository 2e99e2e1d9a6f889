"""A synthetic profile shaped like OTAS's Figure 4, and the query types of Table II.

Throughput at batch 64 follows Figure 4b geometrically: 1500 -> 580 req/s as gamma goes -25 -> 0
and 580 -> 220 req/s as gamma goes 0 -> +32, i.e. thr(g) = 580 * (1500/580) ** (-g/25) for g <= 0
and 580 * (220/580) ** (g/32) for g > 0. Latency is linear in the batch size, from 10 samples'
worth of saturated time at batch 1 (Figure 7: batching raises throughput about tenfold) to
64 / thr(g) at batch 64. Accuracy per task interpolates anchors read off Figure 4a: flat near the
vanilla model down to gamma = -15, falling sharply to 50% (CIFAR10) and 28% (CIFAR100) at -25,
and rising quickly with the first two prompts.

Serving efficiency. Figure 4b is the model's raw throughput; the paper's serving system sustains
less: its rate table f (Table I, "defined according to Fig. 4b") moves off each gamma at 0.61-0.66
of that gamma's Figure 4b throughput (8: 280 / 455, 4: 320 / 514, 2: 350 / 546, 0: 380 / 580,
-5: 450 / 701, -10: 520 / 848 req/s). `TABLE_I_EFFICIENCY` is their geometric mean (0.631);
`figure4_profile(serving_efficiency=...)` divides every latency by it, so the simulated worker
sustains Table I's rates. `serving_efficiency=1.0` is Figure 4b's raw throughput.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant

PAPER_GAMMAS = (-20, -15, -10, -5, 0, 2, 4, 8)
PROFILED_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)

# (gamma, accuracy) anchors per task; EuroSAT has no curve in the paper, it sits between.
ACCURACY_ANCHORS: dict[str, tuple[tuple[int, float], ...]] = {
    "cifar10": ((-25, 0.50), (-15, 0.955), (-10, 0.970), (-5, 0.977), (0, 0.980), (2, 0.986),
                (4, 0.988), (8, 0.990), (32, 0.992)),
    "cifar100": ((-25, 0.28), (-15, 0.820), (-10, 0.862), (-5, 0.878), (0, 0.885), (2, 0.907),
                 (4, 0.913), (8, 0.918), (32, 0.925)),
    "eurosat": ((-25, 0.45), (-15, 0.945), (-10, 0.962), (-5, 0.970), (0, 0.974), (2, 0.982),
                (4, 0.984), (8, 0.986), (32, 0.989)),
}


@dataclass(frozen=True)
class QuerySpec:
    """One query type of Table II."""

    task: str
    latency_s: float
    utility: float


TABLE_II: tuple[QuerySpec, ...] = (
    QuerySpec("cifar10", 0.6, 0.3), QuerySpec("cifar10", 1.0, 0.01),
    QuerySpec("cifar100", 0.6, 1.0), QuerySpec("cifar100", 1.0, 0.2),
    QuerySpec("eurosat", 0.6, 0.3), QuerySpec("eurosat", 1.0, 0.01),
)


# Table I: the highest arrival rate (req/s) at which f still picks each gamma.
TABLE_I_MAX_QPS: dict[int, float] = {8: 280.0, 4: 320.0, 2: 350.0, 0: 380.0, -5: 450.0,
                                     -10: 520.0}


def table_i_efficiency() -> float:
    """Geometric mean over Table I's gammas of (Table I's top rate / Figure 4b throughput)."""
    logs = [math.log(q / throughput_qps(g)) for g, q in TABLE_I_MAX_QPS.items()]
    return math.exp(sum(logs) / len(logs))


def throughput_qps(gamma: int) -> float:
    """Saturated (batch 64) throughput of Figure 4b's shape."""
    if gamma <= 0:
        return float(580.0 * (1500.0 / 580.0) ** (-gamma / 25.0))
    return float(580.0 * (220.0 / 580.0) ** (gamma / 32.0))


def latency_ms(gamma: int, batch_size: int, max_batch_size: int = 64) -> float:
    per_sample_ms = 1000.0 / throughput_qps(gamma)
    first_ms = 10.0 * per_sample_ms
    last_ms = max_batch_size * per_sample_ms
    return first_ms + (last_ms - first_ms) * (batch_size - 1) / (max_batch_size - 1)


def accuracy(task: str, gamma: int) -> float:
    anchors = ACCURACY_ANCHORS[task]
    for (g0, a0), (g1, a1) in zip(anchors, anchors[1:], strict=False):
        if g0 <= gamma <= g1:
            return a0 + (a1 - a0) * (gamma - g0) / (g1 - g0)
    raise ValueError(f"gamma {gamma} outside [{anchors[0][0]}, {anchors[-1][0]}]")


def figure4_profile(gammas: tuple[int, ...] = PAPER_GAMMAS,
                    serving_efficiency: float | None = None) -> Profile:
    """The synthetic profile: one variant per (task, gamma), `Variant.model` = task. Latencies
    are Figure 4b's divided by `serving_efficiency` (default: `table_i_efficiency()`)."""
    eff = table_i_efficiency() if serving_efficiency is None else serving_efficiency
    if not 0.0 < eff <= 1.0:
        raise ValueError(f"serving_efficiency must be in (0, 1], got {eff}")
    variants = []
    for task in ACCURACY_ANCHORS:
        for gamma in gammas:
            ms = [latency_ms(gamma, b) / eff for b in PROFILED_BATCH_SIZES]
            points = tuple(LatencyPoint(b, m, m, m, m)
                           for b, m in zip(PROFILED_BATCH_SIZES, ms, strict=True))
            variants.append(VariantProfile(Variant(f"{task}/g{gamma:+d}", model=task, gamma=gamma),
                                           accuracy(task, gamma), points))
    return Profile("otas-figure4-synthetic", "rtx4080-like (synthetic)", tuple(variants),
                   {"source": "shape of OTAS Fig. 4 / Fig. 7, see docs/otas.md",
                    "serving_efficiency": eff})
