"""Value iteration (§4.1) and the stationary expectations of a policy (§5.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from policies.model_selection.mdp import MDP
from policies.model_selection.mdp_spec import Reward


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
                    tolerance: float = 0.0, reward: NDArray[Any] | None = None) -> NDArray[Any]:
    """Bellman backups from V = 0. The defaults are the reference's: undiscounted, 100 backups
    (a finite horizon long enough that the greedy policy is stationary); with discount < 1 and a
    tolerance it runs to convergence instead. `reward` (one per row) replaces `mdp.row_reward`.
    Returns the chosen row per state."""
    row_reward = mdp.row_reward if reward is None else reward
    size = mdp.space.size
    slot_rows = np.full((size, int(mdp.row_slot.max()) + 1), -1)
    slot_rows[mdp.row_state, mdp.row_slot] = np.arange(mdp.num_rows)
    probs = mdp.probs
    value: NDArray[Any] = np.zeros(size)
    for _ in range(iterations):
        new_value, _ = _best_rows(mdp, row_reward + discount * (probs @ value), slot_rows)
        delta = float(np.max(np.abs(new_value - value)))
        value = new_value
        if tolerance > 0 and delta < tolerance:
            break
    _, rows = _best_rows(mdp, row_reward + discount * (probs @ value), slot_rows)
    return rows


def stationary(mdp: MDP, rows: NDArray[Any], max_iterations: int = 1000,
               tolerance: float = 1e-13) -> NDArray[Any]:
    """Distribution over states after power iteration from the empty queue (§5.1). The chain is
    about 90 % zeros, so each step is a sparse product."""
    chain_t = sparse.csr_matrix(mdp.probs[rows].T)
    dist = np.zeros(mdp.space.size)
    dist[mdp.space.empty] = 1.0
    for _ in range(max_iterations):
        nxt = chain_t @ dist
        if float(np.abs(nxt - dist).sum()) < tolerance:
            return nxt
        dist = nxt
    return dist


def expectations(mdp: MDP, rows: NDArray[Any], dist: NDArray[Any] | None = None) -> tuple[float, float]:
    """(expected accuracy per satisfied query, expected violation rate), queries weighted by the
    batch each state serves; `dist` is the policy's stationary distribution if already known."""
    if dist is None:
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


def query_reward_rate(mdp: MDP, rows: NDArray[Any], dist: NDArray[Any] | None = None) -> float:
    """Long-run reward per served query, E[b R] / E[b] under the stationary distribution: the
    accuracy per query with late queries counted as 0, i.e. (1 - violations) x accuracy."""
    if dist is None:
        dist = stationary(mdp, rows)
    served = dist * mdp.row_batch[rows]
    total = float(served.sum())
    return float((served * mdp.row_reward[rows]).sum()) / total if total > 0 else 0.0


def per_query_rows(mdp: MDP, iterations: int = 100, discount: float = 1.0,
                   max_rounds: int = 20, tolerance: float = 1e-9) -> NDArray[Any]:
    """Rows maximizing the reward per query, E[b R] / E[b] (Reward.PER_QUERY), by Dinkelbach's
    parametric method: start from the per-decision policy with ratio rho, then repeatedly solve
    the MDP with reward b (R - rho), whose optimum has non-negative gain exactly while some policy
    earns more than rho per query, and take the new policy's ratio. Each round can only raise
    rho; it stops when the policy repeats or rho no longer rises (2-3 rounds in practice)."""
    return _per_query(mdp, iterations, discount, max_rounds, tolerance)[0]


def _per_query(mdp: MDP, iterations: int, discount: float, max_rounds: int,
               tolerance: float) -> tuple[NDArray[Any], NDArray[Any]]:
    """per_query_rows, and the stationary distribution of the rows it returns."""
    rows = value_iteration(mdp, iterations, discount)
    dist = stationary(mdp, rows)
    rate = query_reward_rate(mdp, rows, dist)
    for _ in range(max_rounds):
        shifted = mdp.row_batch * (mdp.row_reward - rate)
        candidate = value_iteration(mdp, iterations, discount, reward=shifted)
        if np.array_equal(candidate, rows):
            break
        candidate_dist = stationary(mdp, candidate)
        candidate_rate = query_reward_rate(mdp, candidate, candidate_dist)
        if candidate_rate <= rate + tolerance:
            break
        rows, dist, rate = candidate, candidate_dist, candidate_rate
    return rows, dist


def solve(mdp: MDP, iterations: int = 100, discount: float = 1.0) -> SolvedPolicy:
    """The policy for `mdp.spec.reward`, and its expectations (§5.1)."""
    if mdp.spec.reward is Reward.PER_QUERY:
        rows, dist = _per_query(mdp, iterations, discount, max_rounds=20, tolerance=1e-9)
    else:
        rows = value_iteration(mdp, iterations, discount)
        dist = stationary(mdp, rows)
    accuracy, violation = expectations(mdp, rows, dist)
    return SolvedPolicy(mdp, rows, accuracy, violation, iterations)
