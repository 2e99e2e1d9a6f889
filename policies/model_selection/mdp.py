"""Build the per-worker MDP of RAMSIS (§4): states, valid actions, rewards and transition rows.

Rows are stored densely, one per valid (state, action), in build order; `row_slot` numbers each
state's actions in model order (so "first best" ties go to the lowest model index, as the
reference implementation does).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
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
    """Arrival stream of the worker per queue length n: (rate, stride, phase weights).

    With jobs of J items (`spec.job_size`) the arrivals are calls at rate / J; transitions are
    computed over call counts on a space of ceil(N / J) calls and mapped to item counts (c calls
    -> c J items; beyond N -> the full state)."""

    def __init__(self, spec: MDPSpec, space: StateSpace, model: LatencyModel) -> None:
        self.spec = spec
        self.job = spec.job_size
        self.round_robin = spec.balancing is LoadBalancing.ROUND_ROBIN
        self.job_space = StateSpace(-(-spec.max_queue // self.job), space.grid_s)
        job_spec = replace(spec, load_qps=spec.load_qps / self.job,
                           max_queue=self.job_space.max_queue, max_batch=None)
        self.phase = phase_weights(job_spec, self.job_space) if self.round_robin else None
        self.service_rate = _jsq_service_rate(spec, model)
        self._cache: dict[tuple[float, float], NDArray[Any]] = {}
        self.space = space
        self._to_items = self._item_index_map()

    def _item_index_map(self) -> NDArray[Any]:
        """Item-space state of each call-space state."""
        js, space = self.job_space, self.space
        out = np.full(js.size, space.full)
        out[js.empty] = space.empty
        for c in range(1, js.max_queue + 1):
            if c * self.job <= space.max_queue:
                for j in range(js.num_slack):
                    out[js.index(c, j)] = space.index(c * self.job, j)
        return out

    def rate(self, n: int) -> float:
        if self.round_robin:
            return self.spec.load_qps
        return shortest_queue_rate(self.spec, n, self.service_rate)

    def weights(self, n: int, js: NDArray[Any]) -> NDArray[Any]:
        if self.phase is None:
            return np.ones((js.size, 1))
        return self.phase[-(-n // self.job) - 1, js, :]

    def stride(self) -> int:
        return self.spec.num_workers if self.round_robin else 1

    def next_probs(self, latency_s: float, n: int) -> NDArray[Any]:
        key = (latency_s, self.rate(n))
        if key not in self._cache:
            calls = next_state_probs(latency_s, key[1] / self.job, self.stride(),
                                     self.spec.slo_s, self.job_space)
            if self.job == 1:
                self._cache[key] = calls
            else:
                out = np.zeros((calls.shape[0], self.space.size))
                for col, target in enumerate(self._to_items):  # several calls -> one full state
                    out[:, target] += calls[:, col]
                self._cache[key] = out
        return self._cache[key]

    def item_counts(self, latency_s: float, n: int) -> NDArray[Any]:
        """P(k items arrive during L | phase), k = 0..N, last column: more; (stride, N + 2)."""
        n_max = self.spec.max_queue
        if self.job == 1:
            return arrival_count_probs(latency_s, self.rate(n), self.stride(), n_max)
        calls = arrival_count_probs(latency_s, self.rate(n) / self.job, self.stride(),
                                    -(-n_max // self.job) + 1)
        out = np.zeros((calls.shape[0], n_max + 2))
        for c in range(calls.shape[1] - 1):
            out[:, min(c * self.job, n_max + 1)] += calls[:, c]
        out[:, -1] += calls[:, -1]
        return out


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
    first = spec.job_size  # the next call's items, all with the full SLO as slack
    wait[0, space.index(first, top) if first <= spec.max_queue else space.full] = 1.0
    rows.add(np.array([space.empty]), -1, 0, 0.0, False, wait)
    cap = spec.batch_cap
    for n in range(1, spec.max_queue + 1):
        states_n = np.array([space.index(n, j) for j in range(space.num_slack)])
        if n > cap:  # a capped batch: serve `cap`, the rest stays queued
            _add_capped_rows(rows, spec, space, model, streams, n, states_n)
            continue
        lat = np.array([model.latency(m, n) for m in range(acc.size)])
        fastest = int(np.argmin(lat))
        for m in range(acc.size):
            js = np.nonzero(grid + _TOL_S >= lat[m])[0]
            if js.size:
                probs = streams.weights(n, js) @ streams.next_probs(float(lat[m]), n)
                rows.add(states_n[js], m, n, float(acc[m]), False, probs)
            if spec.batching is Batching.VARIABLE:
                for b in range(1, n):
                    _add_partial_rows(rows, spec, space, model, streams, n, m, b, states_n)
        late_js = np.nonzero(grid + _TOL_S < lat[fastest])[0]
        if late_js.size:
            probs = streams.weights(n, late_js) @ streams.next_probs(float(lat[fastest]), n)
            rows.add(states_n[late_js], fastest, n, 0.0, True, probs)
    _add_full_row(rows, spec, space, model, streams)
    return _assemble(spec, space, acc, rows)


def _add_capped_rows(rows: _Rows, spec: MDPSpec, space: StateSpace, model: LatencyModel,
                     streams: _Streams, n: int, states_n: NDArray[Any]) -> None:
    """Queue n longer than the batch cap B: every model serves B (variable batching: any b <= B)
    on time where it can; the fastest serves B late where none can."""
    cap = spec.batch_cap
    sizes = range(1, cap + 1) if spec.batching is Batching.VARIABLE else (cap,)
    for m in range(len(model.names)):
        for b in sizes:
            _add_partial_rows(rows, spec, space, model, streams, n, m, b, states_n)
    fastest = int(np.argmin([model.latency(m, cap) for m in range(len(model.names))]))
    _add_partial_rows(rows, spec, space, model, streams, n, fastest, cap, states_n, late=True)


def _add_partial_rows(rows: _Rows, spec: MDPSpec, space: StateSpace, model: LatencyModel,
                      streams: _Streams, n: int, m: int, b: int, states_n: NDArray[Any],
                      late: bool = False) -> None:
    """Serve b < n with model m (on time, or late with reward 0). The remaining head arrived
    after the served one, so its slack is at least T_j - L: we use that conservative bound for
    the next state's slack (exact when the queue holds the items of one job)."""
    grid = space.grid_s
    lat = model.latency(m, b)
    on_time = grid + _TOL_S >= lat
    js = np.nonzero(~on_time if late else on_time)[0]
    if not js.size:
        return
    counts = streams.weights(n, js) @ streams.item_counts(lat, n)
    j_next = np.array([space.slack_index(grid[j] - lat) for j in js])
    rows.add(states_n[js], m, b, 0.0 if late else float(model.accuracy[m]), late,
             _spread(space, counts, n - b, j_next))


def _spread(space: StateSpace, counts: NDArray[Any], remaining: int,
            j_next: NDArray[Any]) -> NDArray[Any]:
    """Next-state rows: `remaining` queued items plus k arrivals (probability counts[row, k];
    the last column is "more"), head slack index j_next[row]; past N -> the full state."""
    num_k = counts.shape[1] - 1
    n_next = remaining + np.arange(num_k)[None, :]  # (1, k)
    targets = np.where(n_next > space.max_queue, space.full,
                       1 + (n_next - 1) * space.num_slack + j_next[:, None])
    probs = np.zeros((counts.shape[0], space.size))
    rows_idx = np.repeat(np.arange(counts.shape[0]), num_k)
    np.add.at(probs, (rows_idx, targets.reshape(-1)), counts[:, :-1].reshape(-1))
    probs[:, space.full] += counts[:, -1]
    return probs


def _add_full_row(rows: _Rows, spec: MDPSpec, space: StateSpace, model: LatencyModel,
                  streams: _Streams) -> None:
    """The full-queue state: the fastest model serves (late). Whole queue: the next state
    follows from the arrivals meanwhile; capped batch: N + 1 - B items stay, with the head's
    slack unknown, taken as 0 (the most urgent)."""
    n_full = spec.max_queue + 1
    b = min(n_full, spec.batch_cap)
    lat_full = [model.latency(m, b) for m in range(len(model.names))]
    fastest = int(np.argmin(lat_full))
    weights = streams.weights(n_full, np.array([0]))
    if b == n_full:
        probs = weights @ streams.next_probs(lat_full[fastest], n_full)
    else:
        counts = weights @ streams.item_counts(lat_full[fastest], n_full)
        probs = _spread(space, counts, n_full - b, np.zeros(1, dtype=np.int64))
    rows.add(np.array([space.full]), fastest, b, 0.0, True, probs)


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
