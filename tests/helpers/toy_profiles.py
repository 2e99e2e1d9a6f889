"""Toy latency models for the RAMSIS MDP (transitions, rewards, value iteration)."""

from __future__ import annotations

from policies.profile import LatencyModel


def toy_model() -> LatencyModel:
    """Three variants (fast 10 ms, mid 25 ms, slow 50 ms at batch 1; +60% per extra item),
    accuracies 0.6 / 0.75 / 0.85, batches up to 8."""
    lat = tuple(tuple(base * (1 + 0.6 * (b - 1)) for b in range(1, 9)) for base in (0.01, 0.025, 0.05))
    return LatencyModel(("fast", "mid", "slow"), (0.6, 0.75, 0.85), lat, 8)
