"""Build the per-worker MDP of RAMSIS (§4): states, valid actions, rewards and transition rows.

Rows are stored densely, one per valid (state, action), in build order; `row_slot` numbers each
state's actions in model order (so "first best" ties go to the lowest model index, as the
reference implementation does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from policies.model_selection.mdp_spec import (
    Batching,
    LoadBalancing,
    MDPSpec,
    StateSpace,
    slack_grid,
)
from policies.model_selection.transitions import (
    arrival_count_probs,
    next_state_probs,
    phase_weights,
    shortest_queue_rate,
)
from policies.profile import LatencyModel

_TOL_S = 1e-12


@dataclass(frozen=True)
class MDP:
    spec: MDPSpec
    space: StateSpace
    accuracy: NDArray[Any]  # (M,)
    row_state: NDArray[Any]  # (R,) state of each row
    row_slot: NDArray[Any]  # (R,) position in its state's action list
    row_model: NDArray[Any]  # (R,) model index, -1 for the wait action
    row_batch: NDArray[Any]  # (R,) batch size
    row_reward: NDArray[Any]  # (R,) accuracy if the batch meets the head's deadline, else 0
    row_late: NDArray[Any]  # (R,) the head query misses its deadline
    probs: NDArray[Any]  # (R, S)

    @property
    def num_rows(self) -> int:
        return int(self.row_state.size)


@dataclass
class _Rows:
    state: list[NDArray[Any]]
    model: list[NDArray[Any]]
    batch: list[NDArray[Any]]
    reward: list[NDArray[Any]]
    late: list[NDArray[Any]]
    probs: list[NDArray[Any]]

    def add(self, states: NDArray[Any], model: int, batch: int, reward: float, late: bool,
            probs: NDArray[Any]) -> None:
        count = states.size
        self.state.append(states)
        self.model.append(np.full(count, model))
        self.batch.append(np.full(count, batch))
        self.reward.append(np.full(count, reward))
        self.late.append(np.full(count, late))
        self.probs.append(probs)


class _Streams:
    """Arrival stream of the worker per queue length n: (rate, stride, phase weights)."""

    def __init__(self, spec: MDPSpec, space: StateSpace, model: LatencyModel) -> None:
        self.spec = spec
        self.round_robin = spec.balancing is LoadBalancing.ROUND_ROBIN
        self.phase = phase_weights(spec, space) if self.round_robin else None
        self.service_rate = _jsq_service_rate(spec, model)
        self._cache: dict[tuple[float, float], NDArray[Any]] = {}
        self.space = space

    def rate(self, n: int) -> float:
        if self.round_robin:
            return self.spec.load_qps
        return shortest_queue_rate(self.spec, n, self.service_rate)

    def weights(self, n: int, js: NDArray[Any]) -> NDArray[Any]:
        if self.phase is None:
            return np.ones((js.size, 1))
        return self.phase[n - 1, js, :]

    def stride(self) -> int:
        return self.spec.num_workers if self.round_robin else 1

    def next_probs(self, latency_s: float, n: int) -> NDArray[Any]:
        key = (latency_s, self.rate(n))
        if key not in self._cache:
            self._cache[key] = next_state_probs(latency_s, key[1], self.stride(), self.spec.slo_s,
                                                self.space)
        return self._cache[key]


def _jsq_service_rate(spec: MDPSpec, model: LatencyModel) -> float:
    """Appendix I.1's mu: the slowest batch-1 latency among models that can carry the load with
    some batch b (l(m,b) <= SLO/2 and b / l(m,b) >= lambda/K), as a rate."""
    per_worker = spec.load_qps / spec.num_workers
    slowest = min(model.latency_s[i][0] for i in range(len(model.names)))
    for i in range(len(model.names)):
        for b in range(1, spec.max_queue + 1):
            lat = model.latency(i, b)
            if lat <= spec.slo_s / 2 and b / lat >= per_worker:
                slowest = max(slowest, model.latency_s[i][0])
                break
    return 1.0 / slowest


def build_mdp(spec: MDPSpec, model: LatencyModel) -> MDP:
    """The MDP for `spec` over the variants of `model` (pass a Pareto subset, §4.3.3)."""
    space = StateSpace(spec.max_queue, slack_grid(spec, model))
    grid, top = space.grid_s, space.num_slack - 1
    streams = _Streams(spec, space, model)
    acc = np.asarray(model.accuracy)
    rows = _Rows([], [], [], [], [], [])
    wait = np.zeros((1, space.size))
    wait[0, space.index(1, top)] = 1.0
    rows.add(np.array([space.empty]), -1, 0, 0.0, False, wait)
    for n in range(1, spec.max_queue + 1):
        lat = np.array([model.latency(m, n) for m in range(acc.size)])
        fastest = int(np.argmin(lat))
        states_n = np.array([space.index(n, j) for j in range(space.num_slack)])
        for m in range(acc.size):
            js = np.nonzero(grid + _TOL_S >= lat[m])[0]
            if js.size:
                probs = streams.weights(n, js) @ streams.next_probs(float(lat[m]), n)
                rows.add(states_n[js], m, n, float(acc[m]), False, probs)
            if spec.batching is Batching.VARIABLE:
                _add_partial_batches(rows, spec, space, model, streams, n, m, states_n)
        late_js = np.nonzero(grid + _TOL_S < lat[fastest])[0]
        if late_js.size:
            probs = streams.weights(n, late_js) @ streams.next_probs(float(lat[fastest]), n)
            rows.add(states_n[late_js], fastest, n, 0.0, True, probs)
    n_full = spec.max_queue + 1
    lat_full = [model.latency(m, n_full) for m in range(acc.size)]
    fastest = int(np.argmin(lat_full))
    probs = streams.weights(n_full, np.array([0])) @ streams.next_probs(lat_full[fastest], n_full)
    rows.add(np.array([space.full]), fastest, n_full, 0.0, True, probs)
    return _assemble(spec, space, acc, rows)


def _add_partial_batches(rows: _Rows, spec: MDPSpec, space: StateSpace, model: LatencyModel,
                         streams: _Streams, n: int, m: int, states_n: NDArray[Any]) -> None:
    """Variable batching: serve b < n. The remaining head arrived after the served one, so its
    slack is at least T_j - L: we use that conservative bound for the next state's slack."""
    grid = space.grid_s
    for b in range(1, n):
        lat = model.latency(m, b)
        js = np.nonzero(grid + _TOL_S >= lat)[0]
        if not js.size:
            continue
        counts = streams.weights(n, js) @ arrival_count_probs(lat, streams.rate(n), streams.stride(),
                                                              spec.max_queue)
        probs = np.zeros((js.size, space.size))
        for row, j in enumerate(js):
            j_next = space.slack_index(grid[j] - lat)
            for k in range(counts.shape[1] - 1):
                n_next = n - b + k
                target = space.full if n_next > spec.max_queue else space.index(n_next, j_next)
                probs[row, target] += counts[row, k]
            probs[row, space.full] += counts[row, -1]
        rows.add(states_n[js], m, b, float(model.accuracy[m]), False, probs)


def _assemble(spec: MDPSpec, space: StateSpace, acc: NDArray[Any], rows: _Rows) -> MDP:
    state = np.concatenate(rows.state)
    model = np.concatenate(rows.model)
    batch = np.concatenate(rows.batch)
    late = np.concatenate(rows.late)
    # Rows stay in build order (no copy of the big matrix); only the slot numbers follow the
    # action order within a state: models by index, larger batches first, late last.
    order = np.lexsort((late, -batch, model, state))
    sorted_state = state[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_state))[0] + 1]
    slot = np.empty(state.size, dtype=np.int64)
    slot[order] = np.arange(state.size) - np.repeat(starts, np.diff(np.r_[starts, state.size]))
    return MDP(spec, space, acc, state, slot, model, batch, np.concatenate(rows.reward), late,
               np.concatenate(rows.probs))
