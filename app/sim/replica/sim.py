"""Discrete-event simulation of the live classifier deployment: K replicas, each with the live
replica's deadline queue (policies/queue.py) and scheduling step (policies/schedulers/step.py)
driving an unchanged `policies.schedulers` Scheduler object.

- Routing as Ray Serve's default router or round-robin (parts.Router); a request no replica
  accepts (`max_ongoing`) waits in the router (FIFO) until one frees a slot.
- A batch takes the profile's latency for (variant, batch size) at a percentile, or a sample of a
  lognormal fitted to the measured p50 and p95 ("sampled").
- `job_size` > 1: each arrival is a job of that many items sent in one call to one replica (as
  POST /v1/jobs); every item's latency is the job's, as the load generator records it.
- A request reaches its replica `overhead_ms` after it is sent (network, ingress, preprocess);
  its deadline is send time + SLO, and latency is measured from the send time as loadgen does.
- Optionally the serving stack in front of the replicas as a FIFO stage (parts.FrontStage) taking
  `front_ms_per_call` + `front_ms_per_item` x items per call; a call leaving it after its
  deadline is answered deadline_exceeded at the replica, as the live replica loop does.
- Optionally the front door (`front_door`): the Serve proxy's per-family concurrency limit,
  the unchanged `policies.admission.ConcurrencyLimiter`, at each call's send. A call beyond the
  limit is answered `refused` at once (429, latency 0) and adds `front_ms_per_refusal` of work
  to the front stage; an admitted call releases its slot when answered, with its latency from
  the send, as the proxy middleware does (deployments/ingress/proxy/front_door.py). The front
  stage's time per call from the stack's measured CPU: app/sim/replica/front_door.py. Live,
  the proxy's limiter lives as long as the proxy, across runs and redeploys: `door` hands a
  run the limiter an earlier run left (`SimRun.door`), as the next run's proxy has it.
- Like the live replica loop (deployments/classifier/loop.py): a full queue (`max_queued_items`)
  sheds the newcomer, items whose deadline has passed are answered deadline_exceeded before each
  decision (`expire_at_deadline`), and the load passed to `decide` is the replica's arrival rate
  over `load_window_s` (the window counts from the first arrival until it fills); with
  `latency_feedback` the scheduler sees the queue in profile time, scaled by the slowdown of the
  replica's batches against the profile (policies/schedulers/slowdown.py).
Results are `RequestRecord`s summarized by the same code as the live load generator.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.kernel import Kernel
from app.sim.replica.config import SchedulerSimConfig
from app.sim.replica.parts import FrontStage, Router, ServiceTimes, call_times
from app.sim.replica.replica import Answer, BatchLog, SimReplica
from app.sim.replica.request_metrics import LoadSummary, RequestRecord, summarize
from app.sim.replica.served import StackDelays
from app.sim.replica.utilities import call_utility
from policies.admission import ConcurrencyLimiter
from policies.profile import Profile
from policies.queue import RateWindow
from policies.schedulers.base import PendingItem, Scheduler
from policies.schedulers.registry import degrades, scheduler_names

__all__ = ["BatchLog", "SchedulerSimConfig", "SimRun", "simulate"]


class Priority(IntEnum):
    """A finishing batch frees its replica before a call at the same instant is routed; a
    scheduler's wake-up comes last."""

    BATCH_DONE = 0
    CALL = 1
    TICK = 2


@dataclass(frozen=True)
class SimRun:
    records: list[RequestRecord]
    summary: LoadSummary
    batches: list[BatchLog] = field(default_factory=list)
    door: ConcurrencyLimiter | None = None  # the front door's limiter as the run left it


def simulate(profile: Profile, make_scheduler: Callable[[int], Scheduler],
             arrivals_s: NDArray[Any], duration_s: float, config: SchedulerSimConfig,
             service_times: Callable[[str, int], float] | None = None,
             stack: StackDelays | None = None, door: ConcurrencyLimiter | None = None) -> SimRun:
    """Run every arrival through the replicas; returns one record per arrival and the summary.

    `service_times(variant, batch size)` -> seconds replaces the profile's batch times (e.g.
    `ServedTimes`, measured in a live replica); `stack` replaces the constant `overhead_ms` with
    per-call times sampled from observed calls (to the ingress, where the server's deadline
    clock starts; on to the replica; and back to the client after the last batch). `door`: the
    front door's limiter to start from (used and changed; default a fresh one from
    `config.front_door`)."""
    service = service_times or ServiceTimes(profile, config.service, config.max_batch_size,
                                            config.seed)
    sim = _Simulation(profile, make_scheduler, arrivals_s, config, service, stack, door)
    sim.kernel.run()
    records = sim.records()
    return SimRun(records, summarize(records, duration_s, config.slo_ms), sim.batches, sim.door)


class _Simulation:
    """One run: the kernel's handlers move calls from the send through the front stage and the
    router into the replicas, whose answers become the calls' records."""

    def __init__(self, profile: Profile, make_scheduler: Callable[[int], Scheduler],
                 arrivals_s: NDArray[Any], cfg: SchedulerSimConfig,
                 service: Callable[[str, int], float], stack: StackDelays | None,
                 door: ConcurrencyLimiter | None = None) -> None:
        self.cfg = cfg
        self.send_s = [float(t) for t in np.asarray(arrivals_s, dtype=float)]
        self.service = service
        self.p50_ms = profile.p50_ms_table()
        max_items = (cfg.max_queued_items if cfg.max_queued_items is not None
                     else max(1, len(self.send_s) * cfg.job_size))  # unbounded: room for all
        self.replicas = [SimReplica(make_scheduler(k), cfg.load_window_s, max_items)
                         for k in range(cfg.replicas)]
        self.deployment_rate = RateWindow(cfg.load_window_s)
        self.router = Router(cfg.routing, cfg.max_ongoing, cfg.seed)
        self.front = FrontStage(cfg.front_servers, cfg.front_s) if cfg.front_s > 0 else None
        self.calls = call_times(len(self.send_s), cfg.overhead_ms / 1000.0, stack)
        self.door = (None if cfg.front_door is None
                     else door if door is not None else ConcurrencyLimiter(cfg.front_door))
        self.backlog: deque[int] = deque()  # calls waiting in the router
        self.alone: set[int] = set()  # calls the door admitted with nothing else in flight
        # what the ingress tells the proxy on each answer (catalog.family_info); a scheduler
        # outside the registry (a test's) is taken not to degrade
        name = self.replicas[0].scheduler.name
        self.degrades = (len(profile.variants) > 1 and name in scheduler_names()
                         and degrades(name))
        self.answers: dict[int, Answer] = {}  # items answered, their call not yet complete
        self.left = [cfg.job_size] * len(self.send_s)  # items of each call not yet answered
        self.done: dict[int, RequestRecord] = {}
        self.batches: list[BatchLog] = []
        self.kernel = Kernel()
        for j, t in enumerate(self.send_s):
            if self.door is None:
                self.kernel.at(t + self.calls[j].to_replica_s, Priority.CALL, self.on_send, j)
            else:
                self.kernel.at(t, Priority.CALL, self.on_door, j)

    # ---- calls ----------------------------------------------------------------------------
    def on_door(self, now: float, call: int) -> None:
        """The proxy's concurrency limit admits the call on its way, or refuses it at once."""
        if self.door is not None and self.door.try_acquire():
            if self.door.inflight == 1:
                self.alone.add(call)
            self.kernel.at(now + self.calls[call].to_replica_s, Priority.CALL, self.on_send, call)
            return
        if self.front is not None:
            self.front.add_work(now, self.cfg.front_ms_per_refusal / 1000.0)
        size = self.cfg.job_size
        for i in range(call * size, (call + 1) * size):
            self.done[i] = RequestRecord(
                index=i, scheduled_s=now, sent_s=now, outcome="refused", latency_ms=0.0,
                status_code=429, job_id=str(call) if size > 1 else None)

    def on_send(self, now: float, call: int) -> None:
        """The call enters the front stage, or reaches the router when there is none."""
        if self.front is None:
            self.on_router(now, call)
        else:
            self.kernel.at(self.front.leave_s(now), Priority.CALL, self.on_router, call)

    def on_router(self, now: float, call: int) -> None:
        self.deployment_rate.add(now, self.cfg.job_size)
        k = self.route() if not self.backlog else None
        if k is None:
            self.backlog.append(call)
        else:
            self.enqueue(call, k, now)

    def route(self) -> int | None:
        return self.router.pick([rep.open_calls for rep in self.replicas])

    def drain_backlog(self, now: float) -> None:
        while self.backlog:
            k = self.route()
            if k is None:
                return
            self.enqueue(self.backlog.popleft(), k, now)

    def enqueue(self, call: int, k: int, now: float) -> None:
        """The call's items join replica `k`'s queue (as the replica's `submit`)."""
        cfg, rep = self.cfg, self.replicas[k]
        size = cfg.job_size
        rep.open_calls += 1
        rep.rate.add(now, size)
        arrival = self.send_s[call] + self.calls[call].to_ingress_s
        deadline = arrival + cfg.budget_s
        for i in range(call * size, (call + 1) * size):
            if deadline <= now:
                self.answer(i, Answer("deadline_exceeded"), now, k)
            elif not rep.queue.free_slots():
                self.answer(i, Answer("shed"), now, k)
            else:
                rep.push(PendingItem(item_id=str(i), arrival_s=arrival, deadline_s=deadline,
                                     task=cfg.task, min_accuracy=cfg.min_accuracy,
                                     utility=call_utility(call, cfg.utilities),
                                     job_id=str(call) if size > 1 else None, job_size=size))
        if rep.batch is None:
            self.step(k, now)

    # ---- replicas -------------------------------------------------------------------------
    def step(self, k: int, now: float) -> None:
        """Replica `k` is idle: take scheduling steps until it runs a batch or waits."""
        cfg, rep = self.cfg, self.replicas[k]
        load = self.deployment_rate if cfg.load_scope == "deployment" else None
        while len(rep.queue) and rep.batch is None:
            pending = rep.queue.pending()
            if cfg.expire_at_deadline:
                expiry = rep.expire(pending, now)
                for p in expiry.expired:
                    self.answer(int(p.item_id), Answer("deadline_exceeded"), now, k)
                pending = expiry.live
                if not pending:
                    break
            outcome = rep.decide(pending, now, load, cfg.latency_feedback)
            rep.drop(outcome.drops)
            for d in outcome.drops:
                self.answer(int(d.item_id), Answer(d.reason.value), now, k)
            if outcome.run is not None:
                batch = rep.start(outcome.run, now, self.service)
                self.batches.append(BatchLog(now, k, batch.variant, len(batch.items)))
                self.kernel.at(now + batch.duration_s, Priority.BATCH_DONE, self.on_batch_done, k)
            elif outcome.idle:
                at = rep.wake_at(now, outcome.wait_s)
                if at is not None:
                    self.kernel.at(at, Priority.TICK, self.on_tick, k)
                break
        self.drain_backlog(now)

    def on_tick(self, now: float, k: int) -> None:
        rep = self.replicas[k]
        if rep.take_wake(now) and rep.batch is None:
            self.step(k, now)

    def on_batch_done(self, now: float, k: int) -> None:
        batch = self.replicas[k].finish(self.p50_ms)
        size = len(batch.items)
        for i in batch.items:
            call = self.calls[i // self.cfg.job_size]
            queued_s = batch.start_s - self.send_s[i // self.cfg.job_size] - call.queue_from_s
            self.answer(i, Answer("ok", batch.variant, size, 1000.0 * queued_s,
                                  1000.0 * batch.duration_s, batch.expected_accuracy), now, k)
        self.step(k, now)

    # ---- answers --------------------------------------------------------------------------
    def answer(self, item: int, answer: Answer, now: float, k: int) -> None:
        """Item `item` is answered; its call's records are written when the whole call is."""
        size = self.cfg.job_size
        call = item // size
        self.answers[item] = answer
        self.left[call] -= 1
        if self.left[call]:
            return
        self.replicas[k].open_calls -= 1
        t = self.send_s[call]
        latency_ms = 1000.0 * (now + self.calls[call].back_s - t)
        if self.door is not None:
            self.door.release(latency_ms / 1000.0, self.cfg.slo_ms / 1000.0,
                              unloaded=call in self.alone, degrades=self.degrades)
            self.alone.discard(call)
        for i in range(call * size, (call + 1) * size):
            a = self.answers.pop(i)
            self.done[i] = RequestRecord(
                index=i, scheduled_s=t, sent_s=t, outcome=a.outcome, latency_ms=latency_ms,
                status_code=200, variant=a.variant, batch_size=a.batch_size,
                queue_ms=a.queue_ms, compute_ms=a.compute_ms,
                expected_accuracy=a.expected_accuracy, replica=str(k),
                job_id=str(call) if size > 1 else None)

    def records(self) -> list[RequestRecord]:
        """One record per item; an item never answered (cannot happen) would say so."""
        size = self.cfg.job_size
        return [self.done.get(i) or RequestRecord(
                    index=i, scheduled_s=self.send_s[i // size], sent_s=self.send_s[i // size],
                    outcome="timeout", error="never answered")
                for i in range(len(self.send_s) * size)]
