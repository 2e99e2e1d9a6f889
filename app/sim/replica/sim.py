"""Discrete-event simulation of the live classifier deployment: K replicas, each with a
deadline-ordered queue driven by an unchanged `policies.schedulers` Scheduler object.

- Routing as Ray Serve's default router (PowerOfTwoChoicesRequestRouter, Ray 2.60): two distinct
  random replicas, the one with fewer ongoing requests (calls not fully answered) wins, ties to
  the first sampled; replicas at `max_ongoing` do not accept, and a request no replica accepts waits in the
  router (FIFO) until one frees a slot. Or plain round-robin.
- A batch takes the profile's latency for (variant, batch size) at a percentile, or a sample of a
  lognormal fitted to the measured p50 and p95 ("sampled").
- `job_size` > 1: each arrival is a job of that many items sent in one call to one replica (as
  POST /v1/jobs); every item's latency is the job's, as the load generator records it.
- A request reaches its replica `overhead_ms` after it is sent (network, ingress, preprocess);
  its deadline is send time + SLO, and latency is measured from the send time as loadgen does.
- Optionally the serving stack in front of the replicas (proxy, ingress, preprocess: CPU work per
  call) as a FIFO stage of `front_servers` servers taking `front_ms_per_call` +
  `front_ms_per_item` x items per call; a call leaving it after its deadline is answered
  deadline_exceeded at the replica, as the live replica loop does.
- Like the live replica loop (deployments/classifier/loop.py): a full queue (`max_queued_items`)
  sheds the newcomer, items whose deadline has passed are answered deadline_exceeded before each
  decision (`expire_at_deadline`), and the load passed to `decide` is the replica's arrival rate
  over `load_window_s` (the window counts from the first arrival until it fills); with
  `latency_feedback` the scheduler sees the queue in profile time, scaled by the slowdown of the
  replica's batches against the profile (policies/schedulers/slowdown.py).
Results are `RequestRecord`s summarized by the same code as the live load generator.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.kernel import EventKind, EventQueue
from app.sim.replica.parts import RateWindow, ServiceTimes
from app.sim.replica.request_metrics import LoadSummary, RequestRecord, summarize
from app.sim.replica.served import StackDelays
from policies.profile import PERCENTILES, Profile
from policies.schedulers.base import PendingItem, Scheduler
from policies.schedulers.slowdown import SlowdownTracker, dilate, undilate

ROUTINGS = ("pow2", "round_robin")
SERVICE_MODES = (*PERCENTILES, "sampled")


@dataclass(frozen=True)
class SchedulerSimConfig:
    replicas: int
    slo_ms: float
    routing: str = "pow2"
    service: str = "p50"
    max_batch_size: int | None = None
    overhead_ms: float = 0.0
    load_window_s: float = 1.0
    load_scope: str = "replica"  # "replica": the replica's arrivals; "deployment": all arrivals
    max_ongoing: int | None = None
    max_queued_items: int | None = None
    expire_at_deadline: bool = True
    task: str = "default"
    min_accuracy: float | None = None
    job_size: int = 1
    front_ms_per_call: float = 0.0
    front_ms_per_item: float = 0.0
    front_servers: int = 1
    latency_feedback: bool = False  # as the live replica loop's option (slowdown.py)
    response_margin_ms: float = 0.0  # as the ingress's: replicas schedule for SLO - margin
    seed: int = 0

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"need at least one replica, got {self.replicas}")
        if self.routing not in ROUTINGS:
            raise ValueError(f"unknown routing {self.routing!r}; valid: {list(ROUTINGS)}")
        if self.service not in SERVICE_MODES:
            raise ValueError(f"unknown service mode {self.service!r}; valid: {list(SERVICE_MODES)}")
        if self.load_scope not in ("replica", "deployment"):
            raise ValueError(f"unknown load scope {self.load_scope!r}")
        if self.job_size < 1:
            raise ValueError(f"job size must be >= 1, got {self.job_size}")
        if self.front_servers < 1:
            raise ValueError(f"need at least one front server, got {self.front_servers}")

    @property
    def front_s(self) -> float:
        """Front-stage service time of one call (0: no front stage)."""
        return (self.front_ms_per_call + self.front_ms_per_item * self.job_size) / 1000.0


@dataclass(frozen=True)
class SimRun:
    records: list[RequestRecord]
    summary: LoadSummary
    batches: list[tuple[float, int, str, int]] = field(default_factory=list)  # t, replica, variant, size


class _Replica:
    def __init__(self, scheduler: Scheduler, window_s: float) -> None:
        self.scheduler = scheduler
        self.pending: list[tuple[float, int, PendingItem]] = []  # (deadline, seq, item)
        self.running = 0
        self.batch: list[int] = []
        self.batch_meta: tuple[float, float, str, float] = (0.0, 0.0, "", 0.0)
        self.monitor = RateWindow(window_s)
        self.tick_at: float | None = None
        self.open_calls = 0  # submit calls (requests or jobs) not fully answered
        self.slowdown = SlowdownTracker()

    def ongoing(self) -> int:
        return self.open_calls


def simulate(profile: Profile, make_scheduler: Callable[[int], Scheduler],
             arrivals_s: NDArray[Any], duration_s: float, config: SchedulerSimConfig,
             service_times: Callable[[str, int], float] | None = None,
             stack: StackDelays | None = None) -> SimRun:
    """Run every arrival through the replicas; returns one record per arrival and the summary.

    `service_times(variant, batch size)` -> seconds replaces the profile's batch times (e.g.
    `ServedTimes`, measured in a live replica); `stack` replaces the constant `overhead_ms` with
    per-call times sampled from observed calls (to the ingress, where the server's deadline
    clock starts; on to the replica; and back to the client after the last batch)."""
    cfg = config
    times = [float(t) for t in np.asarray(arrivals_s, dtype=float)]
    service = service_times or ServiceTimes(profile, cfg.service, cfg.max_batch_size, cfg.seed)
    replicas = [_Replica(make_scheduler(k), cfg.load_window_s) for k in range(cfg.replicas)]
    global_monitor = RateWindow(cfg.load_window_s)
    rng = np.random.default_rng(cfg.seed + 1)
    size = cfg.job_size
    records: list[RequestRecord | None] = [None] * (len(times) * size)
    results: dict[int, tuple[str, dict[str, Any]]] = {}
    left = [size] * len(times)
    batches: list[tuple[float, int, str, int]] = []
    backlog: deque[int] = deque()
    events = EventQueue()
    overhead_s = cfg.overhead_ms / 1000.0
    budget_s = (cfg.slo_ms - min(cfg.response_margin_ms, cfg.slo_ms / 2)) / 1000.0
    # per call: send -> replica (pre), send -> ingress (the deadline clock's start), answer -> client
    # (queue_ms counts from the replica without `stack`, from the ingress with it, as live)
    pre, ing, back = [overhead_s] * len(times), [0.0] * len(times), [0.0] * len(times)
    qbase = [overhead_s] * len(times)
    if stack is not None:
        for j in range(len(times)):
            c = stack.sample()
            pre[j], ing[j], back[j] = c.to_ingress_s + c.to_replica_s, c.to_ingress_s, c.back_s
            qbase[j] = c.to_ingress_s
    rr = [0]
    seq = [0]
    front_s = cfg.front_s
    front_free = [0.0] * cfg.front_servers  # heap of the times each front server frees up
    p50_ms = profile.p50_ms_table()

    def finish(i: int, outcome: str, now: float, k: int, **kw: Any) -> None:
        """Item `i` is answered; its call's records are written when the whole call is."""
        job = i // size
        results[i] = (outcome, kw)
        left[job] -= 1
        if left[job]:
            return
        replicas[k].open_calls -= 1
        t = times[job]
        for item in range(job * size, (job + 1) * size):
            out, extra = results.pop(item)
            records[item] = RequestRecord(index=item, scheduled_s=t, sent_s=t, outcome=out,
                                          latency_ms=1000.0 * (now + back[job] - t),
                                          status_code=200,
                                          replica=str(k), job_id=str(job) if size > 1 else None,
                                          **extra)

    def accepts(k: int) -> bool:
        return cfg.max_ongoing is None or replicas[k].ongoing() < cfg.max_ongoing

    def route() -> int | None:
        open_ = [k for k in range(cfg.replicas) if accepts(k)]
        if not open_:
            return None
        if cfg.routing == "round_robin":
            for _ in range(cfg.replicas):
                k = rr[0]
                rr[0] = (rr[0] + 1) % cfg.replicas
                if accepts(k):
                    return k
            return None
        if len(open_) == 1:
            return open_[0]
        i, j = (int(x) for x in rng.choice(len(open_), size=2, replace=False))
        a, b = open_[i], open_[j]
        return b if replicas[b].ongoing() < replicas[a].ongoing() else a

    def enqueue(job: int, k: int, now: float) -> None:
        rep = replicas[k]
        rep.open_calls += 1
        deadline = times[job] + ing[job] + budget_s
        for i in range(job * size, (job + 1) * size):
            rep.monitor.record(now)
            if deadline <= now:
                finish(i, "deadline_exceeded", now, k)
                continue
            if cfg.max_queued_items is not None and len(rep.pending) >= cfg.max_queued_items:
                finish(i, "shed", now, k)
                continue
            item = PendingItem(item_id=str(i), arrival_s=times[job] + ing[job],
                               deadline_s=deadline, task=cfg.task,
                               min_accuracy=cfg.min_accuracy,
                               job_id=str(job) if size > 1 else None, job_size=size)
            bisect.insort(rep.pending, (item.deadline_s, seq[0], item))
            seq[0] += 1
        if rep.running == 0:
            step(k, now)

    def drain_backlog(now: float) -> None:
        while backlog:
            k = route()
            if k is None:
                return
            enqueue(backlog.popleft(), k, now)

    def step(k: int, now: float) -> None:
        rep = replicas[k]
        while rep.pending and rep.running == 0:
            if cfg.expire_at_deadline:
                late = [e for e in rep.pending if e[0] <= now]
                for _, _, p in late:
                    finish(int(p.item_id), "deadline_exceeded", now, k)
                if late:
                    rep.pending = rep.pending[len(late):]
                    continue
            load = (rep.monitor if cfg.load_scope == "replica" else global_monitor).qps(now)
            f = rep.slowdown.factor if cfg.latency_feedback else 1.0
            seen, load = dilate(tuple(p for _, _, p in rep.pending), now, load, f)
            decision = undilate(rep.scheduler.decide(seen, now, load), f)
            removed: set[str] = set()
            for d in decision.drops:
                if d.item_id not in removed and any(p.item_id == d.item_id for _, _, p in rep.pending):
                    removed.add(d.item_id)
                    finish(int(d.item_id), d.reason.value, now, k)
            plan = decision.run
            if plan is not None:
                ids = [x for x in plan.item_ids if x not in removed]
                removed.update(ids)
                dur = service(plan.variant.name, len(ids))
                rep.batch = [int(x) for x in ids]
                rep.batch_meta = (now, dur, plan.variant.name, plan.expected_accuracy)
                rep.running = len(ids)
                batches.append((now, k, plan.variant.name, len(ids)))
                events.push(now + dur, EventKind.BATCH_DONE, k)
            rep.pending = [e for e in rep.pending if e[2].item_id not in removed]
            if plan is None and not removed:
                if decision.wait_s is not None and rep.pending:
                    at = now + max(decision.wait_s, 1e-6)
                    if rep.tick_at is None or at < rep.tick_at:
                        rep.tick_at = at
                        events.push(at, EventKind.TICK, k)
                break
        drain_backlog(now)

    def batch_done(k: int, now: float) -> None:
        rep = replicas[k]
        start, dur, variant, acc = rep.batch_meta
        batch, rep.batch, rep.running = rep.batch, [], 0
        rep.slowdown.observe(p50_ms.get((variant, len(batch))), 1000.0 * dur)
        for i in batch:
            finish(i, "ok", now, k, variant=variant, batch_size=len(batch),
                   queue_ms=1000.0 * (start - times[i // size] - qbase[i // size]),
                   compute_ms=1000.0 * dur, expected_accuracy=acc)
        step(k, now)

    for j, t in enumerate(times):
        events.push(t + pre[j], EventKind.ARRIVAL, j)
    while len(events):
        now, kind, _, payload = events.pop()
        if kind == EventKind.BATCH_DONE:
            batch_done(payload, now)
        elif kind == EventKind.TICK:
            rep = replicas[payload]
            if rep.tick_at is not None and abs(rep.tick_at - now) < 1e-12:
                rep.tick_at = None
                if rep.running == 0:
                    step(payload, now)
        elif payload >= 0 and front_s > 0:  # a call enters the front stage
            i = payload
            start = max(now, heapq.heappop(front_free))
            heapq.heappush(front_free, start + front_s)
            events.push(start + front_s, EventKind.ARRIVAL, -(i + 1))
        else:  # a call reaches the router (payload -(i + 1): it left the front stage)
            i = payload if payload >= 0 else -payload - 1
            for _ in range(size):
                global_monitor.record(now)
            k = route() if not backlog else None
            if k is None:
                backlog.append(i)
            else:
                enqueue(i, k, now)
    done = [r if r is not None else RequestRecord(index=i, scheduled_s=times[i // size],
                                                  sent_s=times[i // size], outcome="timeout",
                                                  error="never answered")
            for i, r in enumerate(records)]
    return SimRun(done, summarize(done, duration_s, cfg.slo_ms), batches)
