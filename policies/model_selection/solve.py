"""Value iteration (§4.1) and the stationary expectations of a policy (§5.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from policies.model_selection.mdp import MDP


@dataclass(frozen=True)
class SolvedPolicy:
    """The chosen row per state and the policy's expected accuracy and violation rate."""

    mdp: MDP
    row_of_state: NDArray[Any]  # (S,) index into mdp rows
    expected_accuracy: float
    expected_violation: float
    iterations: int

    @property
    def model_of_state(self) -> NDArray[Any]:
        return self.mdp.row_model[self.row_of_state]


def _best_rows(mdp: MDP, q: NDArray[Any], slot_rows: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    """Per state, the maximal value and the FIRST row attaining it (lowest model index)."""
    padded = np.full(slot_rows.shape, -np.inf)
    valid = slot_rows >= 0
    padded[valid] = q[slot_rows[valid]]
    best_slot = np.argmax(padded, axis=1)
    return padded.max(axis=1), slot_rows[np.arange(slot_rows.shape[0]), best_slot]


def value_iteration(mdp: MDP, iterations: int = 100, discount: float = 1.0,
                    tolerance: float = 0.0) -> NDArray[Any]:
    """Bellman backups from V = 0. The defaults are the reference's: undiscounted, 100 backups
    (a finite horizon long enough that the greedy policy is stationary); with discount < 1 and a
    tolerance it runs to convergence instead. Returns the chosen row per state."""
    size = mdp.space.size
    slot_rows = np.full((size, int(mdp.row_slot.max()) + 1), -1)
    slot_rows[mdp.row_state, mdp.row_slot] = np.arange(mdp.num_rows)
    probs = mdp.probs
    value: NDArray[Any] = np.zeros(size)
    for _ in range(iterations):
        new_value, _ = _best_rows(mdp, mdp.row_reward + discount * (probs @ value), slot_rows)
        delta = float(np.max(np.abs(new_value - value)))
        value = new_value
        if tolerance > 0 and delta < tolerance:
            break
    _, rows = _best_rows(mdp, mdp.row_reward + discount * (probs @ value), slot_rows)
    return rows


def stationary(mdp: MDP, rows: NDArray[Any], max_iterations: int = 1000,
               tolerance: float = 1e-13) -> NDArray[Any]:
    """Distribution over states after power iteration from the empty queue (§5.1)."""
    chain = mdp.probs[rows]
    dist = np.zeros(mdp.space.size)
    dist[mdp.space.empty] = 1.0
    for _ in range(max_iterations):
        nxt = dist @ chain
        if float(np.abs(nxt - dist).sum()) < tolerance:
            return nxt
        dist = nxt
    return dist


def expectations(mdp: MDP, rows: NDArray[Any]) -> tuple[float, float]:
    """(expected accuracy per satisfied query, expected violation rate), queries weighted by the
    batch each state serves."""
    dist = stationary(mdp, rows)
    served = dist * mdp.row_batch[rows]
    total = served.sum()
    if total <= 0:
        return 0.0, 0.0
    weight = served / total
    late = mdp.row_late[rows]
    ok = weight * ~late
    model = mdp.row_model[rows]
    acc = np.where(model >= 0, mdp.accuracy[np.clip(model, 0, None)], 0.0)
    accuracy = float((ok * acc).sum() / ok.sum()) if ok.sum() > 0 else 0.0
    return accuracy, float((weight * late).sum())


def solve(mdp: MDP, iterations: int = 100, discount: float = 1.0) -> SolvedPolicy:
    rows = value_iteration(mdp, iterations, discount)
    accuracy, violation = expectations(mdp, rows)
    return SolvedPolicy(mdp, rows, accuracy, violation, iterations)
