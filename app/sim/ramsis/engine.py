"""Discrete-event simulator of K workers serving one model-selection task.

Arrivals are routed by a load balancer (round-robin or join-shortest-queue) into per-worker
queues, or kept in one central queue that idle workers pull from (the baselines' adaptive
batching). An idle worker with a non-empty queue asks its policy for (variant, batch size); the
batch takes the profiled latency. Queries are never dropped: late is better than never (RAMSIS §4.3.1).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.kernel import EventKind, EventQueue
from app.sim.ramsis.monitor import LoadMonitor
from policies.model_selection.api import SelectionPolicy, WorkerView
from policies.profile import LatencyModel


class Balancer(Enum):
    ROUND_ROBIN = "round_robin"
    SHORTEST_QUEUE = "shortest_queue"
    CENTRAL = "central"


@dataclass(frozen=True)
class SimConfig:
    num_workers: int
    slo_s: float
    balancer: Balancer = Balancer.ROUND_ROBIN
    monitor_window_s: float = 0.5

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
        cfg = self.config
        k = cfg.num_workers
        central = cfg.balancer is Balancer.CENTRAL
        queues: list[deque[int]] = [deque() for _ in range(1 if central else k)]
        busy = [False] * k
        finish = np.full(arrivals_s.size, np.nan)
        variant = np.full(arrivals_s.size, -1, dtype=np.int32)
        log_t: list[float] = []
        log_v: list[int] = []
        log_b: list[int] = []
        monitor = LoadMonitor(cfg.monitor_window_s)
        events = EventQueue()
        arrivals = arrivals_s.tolist()
        slo = cfg.slo_s
        latency = self.model.latency
        choose = self.policy.choose
        rr = 0
        idle = deque(range(k))

        def dispatch(w: int, now: float) -> None:
            queue = queues[0] if central else queues[w]
            if not queue:
                busy[w] = False
                if central:
                    idle.append(w)
                return
            head = queue[0]
            view = WorkerView(w, len(queue), arrivals[head] + slo - now, monitor.qps(now), now)
            choice = choose(view)
            size = min(max(choice.batch_size, 1), len(queue))
            done = now + latency(choice.variant_index, size)
            for _ in range(size):
                q = queue.popleft()
                finish[q] = done
                variant[q] = choice.variant_index
            log_t.append(now)
            log_v.append(choice.variant_index)
            log_b.append(size)
            busy[w] = True
            events.push(done, EventKind.BATCH_DONE, w)

        if arrivals:
            events.push(arrivals[0], EventKind.ARRIVAL, 0)
        while len(events):
            now, kind, _, payload = events.pop()
            if kind == EventKind.BATCH_DONE:
                dispatch(payload, now)
                continue
            q = payload
            if q + 1 < len(arrivals):
                events.push(arrivals[q + 1], EventKind.ARRIVAL, q + 1)
            monitor.record(now)
            if central:
                queues[0].append(q)
                if idle:
                    dispatch(idle.popleft(), now)
                continue
            if cfg.balancer is Balancer.ROUND_ROBIN:
                w = rr
                rr = (rr + 1) % k
            else:
                w = min(range(k), key=lambda i: (len(queues[i]) + busy[i], i))
            queues[w].append(q)
            if not busy[w]:
                dispatch(w, now)
        return SimRecord(arrivals_s, finish, variant, np.array(log_t), np.array(log_v, dtype=np.int32),
                         np.array(log_b, dtype=np.int32))
