"""Discrete-event simulator of K workers serving one model-selection task.

Arrivals are routed by a load balancer (round-robin or join-shortest-queue) into per-worker
queues, or kept in one central queue that idle workers pull from (the baselines' adaptive
batching). An idle worker with a non-empty queue asks its policy for (variant, batch size); the
batch takes the profiled latency. Queries are never dropped: late is better than never (RAMSIS §4.3.1).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.kernel import Kernel
from policies.model_selection.api import SelectionPolicy, WorkerView
from policies.profile import LatencyModel
from policies.queue import RateWindow


class Balancer(Enum):
    ROUND_ROBIN = "round_robin"
    SHORTEST_QUEUE = "shortest_queue"
    CENTRAL = "central"


class Priority(IntEnum):
    """A finishing batch frees its worker before an arrival at the same instant is routed."""

    BATCH_DONE = 0
    ARRIVAL = 1


@dataclass(frozen=True)
class SimConfig:
    num_workers: int
    slo_s: float
    balancer: Balancer = Balancer.ROUND_ROBIN
    monitor_window_s: float = 0.5  # RAMSIS's load monitor: arrivals over the last 500 ms

    def __post_init__(self) -> None:
        if self.num_workers < 1:
            raise ValueError(f"need at least one worker, got {self.num_workers}")
        if self.slo_s <= 0:
            raise ValueError(f"SLO must be positive, got {self.slo_s}")


@dataclass(frozen=True)
class SimRecord:
    """Per-query outcome arrays (index = query id) plus per-batch decision log."""

    arrivals_s: NDArray[Any]
    finish_s: NDArray[Any]
    variant: NDArray[Any]
    batch_start_s: NDArray[Any]
    batch_variant: NDArray[Any]
    batch_size: NDArray[Any]


class Simulator:
    """One run: `Simulator(config, model, policy).run(arrivals_s)`."""

    def __init__(self, config: SimConfig, model: LatencyModel, policy: SelectionPolicy) -> None:
        self.config = config
        self.model = model
        self.policy = policy

    def run(self, arrivals_s: NDArray[Any]) -> SimRecord:
        kernel = Kernel()
        run = _Run(self.config, self.model, self.policy, arrivals_s, kernel)
        kernel.feed(run.arrivals, Priority.ARRIVAL, run.on_arrival)
        kernel.run()
        return run.record()


class _Run:
    """The state of one run: per-worker queues (one shared queue for CENTRAL), the load monitor
    and the outcome arrays the kernel's handlers fill in."""

    def __init__(self, cfg: SimConfig, model: LatencyModel, policy: SelectionPolicy,
                 arrivals_s: NDArray[Any], kernel: Kernel) -> None:
        k = cfg.num_workers
        self.cfg, self.kernel, self.num_workers = cfg, kernel, k
        self.arrivals_s = arrivals_s
        self.arrivals: list[float] = arrivals_s.tolist()
        self.central = cfg.balancer is Balancer.CENTRAL
        self.queues: list[deque[int]] = [deque() for _ in range(1 if self.central else k)]
        self.busy = [False] * k
        self.idle = deque(range(k))  # CENTRAL: workers waiting for work, longest idle first
        self.next_rr = 0
        self.finish = np.full(arrivals_s.size, np.nan)
        self.variant = np.full(arrivals_s.size, -1, dtype=np.int32)
        self.log_start_s: list[float] = []
        self.log_variant: list[int] = []
        self.log_size: list[int] = []
        self.monitor = RateWindow(cfg.monitor_window_s, full_span=True)
        self.latency = model.latency
        self.choose = policy.choose

    def on_arrival(self, now: float, q: int) -> None:
        self.monitor.add(now)
        if self.central:
            self.queues[0].append(q)
            if self.idle:
                self.dispatch(now, self.idle.popleft())
            return
        w = self.route()
        self.queues[w].append(q)
        if not self.busy[w]:
            self.dispatch(now, w)

    def route(self) -> int:
        if self.cfg.balancer is Balancer.ROUND_ROBIN:
            w = self.next_rr
            self.next_rr = (w + 1) % self.num_workers
            return w
        queues, busy = self.queues, self.busy
        return min(range(self.num_workers), key=lambda i: (len(queues[i]) + busy[i], i))

    def dispatch(self, now: float, w: int) -> None:
        """Worker `w` is free: ask the policy for (variant, batch size) and start the batch."""
        queue = self.queues[0] if self.central else self.queues[w]
        if not queue:
            self.busy[w] = False
            if self.central:
                self.idle.append(w)
            return
        head = queue[0]
        view = WorkerView(w, len(queue), self.arrivals[head] + self.cfg.slo_s - now,
                          self.monitor.rate(now), now)
        choice = self.choose(view)
        size = min(max(choice.batch_size, 1), len(queue))
        done = now + self.latency(choice.variant_index, size)
        finish, variant, index = self.finish, self.variant, choice.variant_index
        for _ in range(size):
            q = queue.popleft()
            finish[q] = done
            variant[q] = index
        self.log_start_s.append(now)
        self.log_variant.append(index)
        self.log_size.append(size)
        self.busy[w] = True
        self.kernel.at(done, Priority.BATCH_DONE, self.dispatch, w)

    def record(self) -> SimRecord:
        return SimRecord(self.arrivals_s, self.finish, self.variant, np.array(self.log_start_s),
                         np.array(self.log_variant, dtype=np.int32),
                         np.array(self.log_size, dtype=np.int32))
