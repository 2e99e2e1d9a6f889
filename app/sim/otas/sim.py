"""Deterministic discrete-event simulation of one accelerator worker serving with OTAS, on the
simulators' event kernel (app/sim/kernel.py).

Queries arrive from a trace and join the batch queue with Algorithm 1. Whenever the worker is
idle and the queue is not empty it asks the policy for a decision (work-conserving), evicts what
the policy evicts, and runs the chosen batch for the profile's latency at the chosen gamma. Each
query's outcome follows section V's four types. When the policy runs nothing the worker waits
for the next arrival; what is still queued once the trace is over is evicted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Protocol

from app.sim.kernel import Kernel
from app.sim.otas.trace import TraceQuery
from policies.queue import RateWindow
from policies.tokens.api import (
    AllocationMethod,
    AllocationProblem,
    BatchingParams,
    BatchQueue,
    OtasDecision,
    OtasSnapshot,
    QueryResult,
    TokenProfile,
    add_query,
    classify,
    tally,
)
from policies.types import Request


class TokenPolicy(Protocol):
    def decide(self, snapshot: OtasSnapshot, now_s: float) -> OtasDecision: ...


class Priority(IntEnum):
    """Every query that has arrived by an instant is queued before the worker decides then."""

    ARRIVAL = 0
    DECIDE = 1


@dataclass(frozen=True)
class SimRun:
    """One policy's run: per-query results, batches per gamma and the DP instances it solved."""

    results: tuple[QueryResult, ...]
    gamma_batches: dict[int, int]
    method_counts: dict[str, int]
    problems: tuple[AllocationProblem, ...] = field(default=(), repr=False)


def simulate(trace: Sequence[TraceQuery], policy: TokenPolicy, profile: TokenProfile,
             batching: BatchingParams, rate_window_s: float = 1.0,
             keep_problems: bool = False) -> SimRun:
    worker = _Worker(trace, policy, profile, batching, rate_window_s, keep_problems)
    return run_worker(worker, trace, Priority.ARRIVAL)


class WorkerRun(Protocol):
    """What `run_worker` needs of a simulated OTAS worker (paper or served setting)."""

    kernel: Kernel
    results: list[QueryResult]
    gamma_batches: Counter[int]
    methods: Counter[str]
    problems: list[AllocationProblem]

    def on_arrival(self, now: float, i: int) -> None: ...


def run_worker(worker: WorkerRun, trace: Sequence[TraceQuery], arrival_priority: int) -> SimRun:
    """Feed the trace's arrivals to `worker`, run the kernel dry, collect its tallies."""
    worker.kernel.feed([q.request.arrival_s for q in trace], arrival_priority, worker.on_arrival)
    worker.kernel.run()
    results = sorted(worker.results, key=lambda q: q.request_id)
    return SimRun(tuple(results), dict(worker.gamma_batches), dict(worker.methods),
                  tuple(worker.problems))


class _Worker:
    """The worker's batch queue, arrival-rate window and outcome tallies between events."""

    def __init__(self, trace: Sequence[TraceQuery], policy: TokenPolicy, profile: TokenProfile,
                 batching: BatchingParams, rate_window_s: float, keep_problems: bool) -> None:
        self.trace, self.policy, self.profile, self.batching = trace, policy, profile, batching
        self.keep_problems = keep_problems
        self.by_id = {q.request.request_id: q for q in trace}
        self.queue = BatchQueue()
        self.window = RateWindow(rate_window_s, full_span=True)
        self.arrived = 0
        self.busy = False  # running a batch, or a decision is due at this instant
        self.results: list[QueryResult] = []
        self.gamma_batches: Counter[int] = Counter()
        self.methods: Counter[str] = Counter()
        self.problems: list[AllocationProblem] = []
        self.kernel = Kernel()

    def on_arrival(self, now: float, i: int) -> None:
        self.queue = add_query(self.queue, self.trace[i].request, self.batching)
        self.window.add(now)
        self.arrived = i + 1
        if not self.busy:
            self.busy = True
            self.kernel.at(now, Priority.DECIDE, self.on_decide)

    def on_decide(self, now: float, _payload: int) -> None:
        """The worker is free: decide, evict, and run the chosen batch (or wait)."""
        self.busy = False
        if not len(self.queue):
            return
        decision = self.policy.decide(OtasSnapshot(self.queue.batches, self.window.rate(now)),
                                      now)
        self.methods[decision.method.value] += 1
        if self.keep_problems and decision.problem is not None:
            self.problems.append(decision.problem)
        evicted = decision.evicted_request_ids
        self._evict([self.by_id[rid].request for rid in evicted])
        self.queue = self.queue.without_requests(set(evicted))
        if decision.run_batch_id is None or decision.gamma is None:
            if self.arrived == len(self.trace):  # trace over and nothing runnable
                self._evict([r for b in self.queue.batches for r in b.requests])
            return
        self._run(now, decision.run_batch_id, decision.gamma)

    def _run(self, now: float, batch_id: int, gamma: int) -> None:
        batch = self.queue.get(batch_id)
        self.queue = self.queue.pop(batch_id)
        gi = self.profile.gamma_index(gamma)
        done = now + self.profile.batch_latency_s(batch.task_counts, gi)
        self.gamma_batches[gamma] += 1
        for r in batch.requests:
            correct = self.by_id[r.request_id].correct_draw < self.profile.task_accuracy(r.task, gi)
            self.results.append(QueryResult(r.request_id, classify(done, r.deadline_s, correct),
                                            r.slo.utility, gamma, done))
        self.busy = True
        self.kernel.at(done, Priority.DECIDE, self.on_decide)

    def _evict(self, requests: Sequence[Request]) -> None:
        self.results.extend(QueryResult(r.request_id, classify(None, r.deadline_s, False),
                                        r.slo.utility) for r in requests)


def tally_run(run: SimRun) -> dict[str, Any]:
    t = tally(run.results)
    out: dict[str, Any] = t.to_dict()
    out["gamma_batches"] = {str(g): c for g, c in sorted(run.gamma_batches.items())}
    out["methods"] = run.method_counts
    out["dp_decisions"] = run.method_counts.get(AllocationMethod.DYNAMIC_PROGRAM.value, 0)
    return out
