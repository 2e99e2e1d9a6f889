"""Transition probabilities of the per-worker MDP (RAMSIS §4.4, appendix I), vectorized.

Derivation used here (equivalent to eq. 2 with intervals A-D). Under round-robin over K workers a
worker receives every K-th central arrival. Interval A fixes the *phase*: given state (n, T_j), the
number k_A of central arrivals while the head query waited (SLO - T_j) lies in [(n-1)K, nK-1], and
the worker's next query is the g-th central arrival after the decision, g = K - k_A % K, with
P(g) proportional to PF(k_A, SLO - T_j). Given g and the action's latency L, the next state is
(n', T_j') iff the g-th central arrival S_g falls in [u_j', u_j'+1) with u_j = L - SLO + T_j
(clipped to [0, L]) and N(L) lies in [g + (n'-1)K, g + n'K - 1]. With
S(g, n', u) = sum_{x<g} P(N(u)=x) P(N(L-u) in [g-x+(n'-1)K, g-x+n'K-1]),
P(s' | s, a) = sum_g P(g) [S(g, n', u_j') - S(g, n', u_j'+1)], a Toeplitz product per u, so the
whole table costs a few batched matrix products per distinct action latency. Arrivals earlier than
L - SLO (a late action) get slack below T_0 and are floored into T_0 (their deadline is gone).
With no arrival during L the worker idles until its next query, which it serves at once with
slack = SLO, so that mass goes straight to (1, SLO); mass beyond N queued goes to the full state.
Shortest-queue (appendix I.1): the worker sees Poisson arrivals at lambda_w(n), i.e. K = 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from policies.model_selection.mdp_spec import MDPSpec, StateSpace
from policies.model_selection.poisson import cdf_table, pmf_table


def next_state_probs(latency_s: float, rate_qps: float, stride: int, slo_s: float,
                     space: StateSpace) -> NDArray[Any]:
    """P(next state | phase g) for an action of latency L: shape (stride, space.size), where
    stride = K for round-robin and 1 for a Poisson worker stream."""
    k, n_max, grid = stride, space.max_queue, space.grid_s
    j_count = space.num_slack
    u = np.clip(latency_s - slo_s + grid, 0.0, latency_s)
    u[0] = 0.0
    u = np.append(u, latency_s)
    p = pmf_table(rate_qps * u, k - 1)  # (J+1, K): P(N(u) = x), x < K
    diff = np.arange(k)[:, None] - np.arange(k)[None, :]
    toeplitz = np.where(diff >= 0, p[:, np.clip(diff, 0, None)], 0.0)  # (J+1, g, d)
    cdf = cdf_table(rate_qps * (latency_s - u), (n_max + 1) * k)
    d = np.arange(1, k + 1)[:, None]
    nn = np.arange(1, n_max + 1)[None, :]
    window = cdf[:, d + nn * k - 1] - cdf[:, d + (nn - 1) * k - 1]  # (J+1, d, n')
    s = toeplitz @ window  # (J+1, g, n')
    q = s[:-1] - s[1:]  # (j', g, n')
    out = np.zeros((k, space.size))
    out[:, 1:1 + n_max * j_count] = q.transpose(1, 2, 0).reshape(k, n_max * j_count)
    np.clip(out, 0.0, None, out=out)
    out[:, space.index(1, j_count - 1)] += cdf_table(np.array([rate_qps * latency_s]), k - 1)[0]
    out[:, space.full] = np.clip(1.0 - out.sum(axis=1), 0.0, None)
    out /= out.sum(axis=1, keepdims=True)
    return out


def arrival_count_probs(latency_s: float, rate_qps: float, stride: int, max_count: int) -> NDArray[Any]:
    """P(k worker arrivals during L | phase g), k = 0..max_count (last column: more), (stride, k+2)."""
    cdf = cdf_table(np.array([rate_qps * latency_s]), (max_count + 2) * stride)[0]
    g = np.arange(1, stride + 1)[:, None]
    kk = np.arange(1, max_count + 1)[None, :]
    out = np.zeros((stride, max_count + 2))
    out[:, 0] = cdf[g[:, 0] - 1]
    out[:, 1:max_count + 1] = cdf[g + kk * stride - 1] - cdf[g + (kk - 1) * stride - 1]
    out[:, -1] = np.clip(1.0 - out[:, :-1].sum(axis=1), 0.0, None)
    return out


def phase_weights(spec: MDPSpec, space: StateSpace) -> NDArray[Any]:
    """P(g | n, j) for round-robin, n = 1..N+1 (N+1: the full state): shape (N+1, J, K); g index 0
    means g = 1. Where every weight underflows (an all-but-impossible state) the phase is uniform."""
    k, n_max, grid = spec.num_workers, space.max_queue + 1, space.grid_s
    pmf = pmf_table(spec.load_qps * (spec.slo_s - grid), n_max * k)  # (J, counts)
    n = np.arange(1, n_max + 1)[:, None]
    g = np.arange(1, k + 1)[None, :]
    counts = (n - 1) * k + (k - g)  # (N, K): k_A for each phase
    w = pmf[:, counts].transpose(1, 0, 2)  # (N, J, K)
    total = w.sum(axis=2, keepdims=True)
    degenerate = total[..., 0] <= 0.0
    w = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
    w[degenerate] = 1.0 / k
    return w


def shortest_queue_rate(spec: MDPSpec, n: int, service_rate_qps: float) -> float:
    """Appendix I.1: lambda_w(n) = lambda/K for n <= 2, (lambda/(K mu))^K mu beyond, where mu is
    read as a service *rate* (1 / latency) so that lambda/(K mu) is a utilisation."""
    per_worker = spec.load_qps / spec.num_workers
    if n <= 2:
        return per_worker
    rho = min(per_worker / service_rate_qps, 1.0)
    return float(rho ** spec.num_workers * service_rate_qps)
