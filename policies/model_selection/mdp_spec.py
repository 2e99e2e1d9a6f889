"""The per-worker MDP of RAMSIS: its parameters, slack grid and state indexing."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from policies.profile import LatencyModel


class Discretization(Enum):
    FIXED_LENGTH = "fld"  # T = 0, SLO/D, ..., SLO (§4.2.2)
    MODEL_BASED = "md"  # every profiled latency <= SLO (§4.2.1)


class LoadBalancing(Enum):
    ROUND_ROBIN = "round_robin"  # §4.4.2
    SHORTEST_QUEUE = "shortest_queue"  # appendix I.1


class Batching(Enum):
    MAXIMAL = "maximal"  # b = n (§4.3.2, the default)
    VARIABLE = "variable"  # 1 <= b <= n


class Reward(Enum):
    """What value iteration maximizes (§4.1: R_a = Accuracy(a) x SLOSatisfied(s, a)).

    PER_DECISION: the reward is earned once per decision, whatever the batch size, as the public
    implementation does; the policy then maximizes the mean accuracy per *batch*, which lets it
    run a slow, accurate model on small batches and a fast one on the large batches that pile up
    meanwhile. PER_QUERY: every query of the batch earns it, and the policy maximizes the long-run
    accuracy per *query* (violations count as 0), the objective §4.1 states and §5.1 and the
    evaluation measure; solved as a ratio of expectations (`solve.solve`)."""

    PER_DECISION = "per_decision"
    PER_QUERY = "per_query"


@dataclass(frozen=True)
class MDPSpec:
    """Everything a policy is specialised to: SLO, workers, load and the modelling choices."""

    slo_s: float
    num_workers: int
    load_qps: float
    max_queue: int = 32
    intervals: int = 100
    discretization: Discretization = Discretization.FIXED_LENGTH
    balancing: LoadBalancing = LoadBalancing.ROUND_ROBIN
    batching: Batching = Batching.MAXIMAL
    reward: Reward = Reward.PER_DECISION
    # None: a batch may take the whole queue (the paper's model, N = max batch). A cap B < N
    # models a replica whose batches hold at most B items while up to N wait (jobs of many items
    # arriving at once): queues longer than B serve B and keep the rest.
    max_batch: int | None = None
    # Items per arrival: calls of J items (a job) arrive as a Poisson stream of rate load / J,
    # each bringing J items that share one deadline. 1 is the paper's model.
    job_size: int = 1

    def __post_init__(self) -> None:
        if self.slo_s <= 0 or self.num_workers < 1 or self.load_qps <= 0:
            raise ValueError(f"need positive SLO, workers and load: {self}")
        if self.max_queue < 1 or self.intervals < 1:
            raise ValueError(f"need max_queue >= 1 and intervals >= 1: {self}")
        if self.max_batch is not None and not 1 <= self.max_batch <= self.max_queue:
            raise ValueError(f"need 1 <= max_batch <= max_queue: {self}")
        if self.job_size < 1:
            raise ValueError(f"need job_size >= 1: {self}")

    @property
    def batch_cap(self) -> int:
        return self.max_queue if self.max_batch is None else self.max_batch


def slack_grid(spec: MDPSpec, model: LatencyModel) -> NDArray[Any]:
    """Increasing slack values T_0 = 0 < ... < T_last = SLO (seconds)."""
    if spec.discretization is Discretization.FIXED_LENGTH:
        return np.arange(spec.intervals + 1) * (spec.slo_s / spec.intervals)
    lat = {round(t, 9) for table in model.latency_s for t in table[: spec.max_queue] if t <= spec.slo_s}
    return np.array(sorted(lat | {0.0, round(spec.slo_s, 9)}))


@dataclass(frozen=True)
class StateSpace:
    """State 0 is the empty queue, then (n, j) for n = 1..N and slack index j, then the full-queue
    state (phi) last."""

    max_queue: int
    grid_s: NDArray[Any]

    @property
    def num_slack(self) -> int:
        return int(self.grid_s.size)

    @property
    def size(self) -> int:
        return 2 + self.max_queue * self.num_slack

    @property
    def empty(self) -> int:
        return 0

    @property
    def full(self) -> int:
        return self.size - 1

    def index(self, n: int, j: int) -> int:
        return 1 + (n - 1) * self.num_slack + j

    def slack_index(self, slack_s: float) -> int:
        """Largest j with T_j <= slack (0 when the slack is negative)."""
        j = int(np.searchsorted(self.grid_s, slack_s + 1e-12, side="right")) - 1
        return max(j, 0)

    def lookup(self, queue_length: int, slack_s: float) -> int:
        if queue_length <= 0:
            return self.empty
        if queue_length > self.max_queue:
            return self.full
        return self.index(queue_length, self.slack_index(slack_s))
