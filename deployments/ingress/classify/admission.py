"""Admission at the ingress: refuse what cannot be answered in time before it costs a decode or a
model run, and keep one job from filling a family's queue.

The estimate is ingress-local and needs no call: the ingress counts each family's items in flight
(sent to preprocess, not yet answered) and prices them with the family's profiled per-item time
at its best batch (the catalog's fastest variant at its largest batch: under overload the
policies degrade to it), spread over the family's replicas. With several ingress replicas each
sees about its share of the traffic, so its count is scaled by their number. Where the ingress
has measured the family's answers to drain slower than the profile says (the front, not the
model, is the bottleneck), the measured drain time prices them instead (`DrainEstimate`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from deployments.ingress.classify.catalog import Catalog, FamilyInfo, TaskInfo


@dataclass(frozen=True)
class FamilyCapacity:
    """A family's serving capacity as configured (classifier replicas and queue bound)."""

    replicas: int
    max_queued_items: int


@dataclass(frozen=True)
class Refusal:
    """Why a request is refused now, and when to try again (whole seconds, at least 1)."""

    message: str
    retry_after_s: int
    expected_wait_s: float


@dataclass(frozen=True)
class JobRoom:
    """How many of a job's items may go to the family now (the rest are shed at once)."""

    admitted: int
    shed: int
    reason: str


def per_item_s(task: TaskInfo) -> float:
    """Profiled seconds per item of the task's cheapest way through: the least time per item
    over variants at the largest profiled batch."""
    best = math.inf
    for v in task.variants:
        if v.latency_ms_by_batch:
            size = max(v.latency_ms_by_batch)
            best = min(best, v.latency_ms_by_batch[size] / size)
        else:
            best = min(best, v.latency_ms)
    return best / 1000.0


ANSWERS_KEPT, ANSWERS_FRESH_S = 64, 30.0  # the path's fastest answer: over what it is taken
ANSWERS_MIN = 8  # fresh answers before the fastest of them can refuse (one cold answer could,
# and the refusals it caused left no faster answer to replace it for 30 s)


class DrainEstimate:
    """What this ingress measures of a family: its answers' latency is about `base` (the
    unloaded time: hops, decode, one batch) plus the items ahead times a drain time per item.
    When the front (proxy, ingress, preprocess CPU) is the bottleneck rather than the model,
    the profile under-prices each item ahead; the measured drain time does not. A family with
    nothing in flight at this ingress gets no measured wait at all: only answers refresh the
    estimate, so a `base` measured high once (a call that waited for a replica during a node
    loss, a cold replica's first answer) would otherwise refuse every request from then on
    and never be corrected."""

    def __init__(self, samples: int = 256, alpha: float = 0.1) -> None:
        self._latencies: deque[float] = deque(maxlen=samples)
        self.alpha = alpha
        self.base_s = 0.0
        self.per_item_s = 0.0

    def record(self, ahead_items: int, latency_s: float) -> None:
        """One answered call: `ahead_items` were in flight for the family when it was sent
        (its own included), and it took `latency_s` from send to answer."""
        self._latencies.append(latency_s)
        self.base_s = min(self._latencies)
        if ahead_items >= 2:
            sample = max(0.0, latency_s - self.base_s) / ahead_items
            self.per_item_s += self.alpha * (sample - self.per_item_s)

    def wait_s(self, inflight_items: int) -> float:
        if not self._latencies or inflight_items <= 0:
            return 0.0
        return self.base_s + inflight_items * self.per_item_s


class Admission:
    """In-flight items per family at this ingress replica and the checks over them."""

    def __init__(self, catalog: Catalog, capacity: Mapping[str, FamilyCapacity],
                 ingress_replicas: int = 1, max_job_share: float = 1.0) -> None:
        missing = sorted(set(catalog.names()) - set(capacity))
        if missing:
            raise ValueError(f"no capacity given for families {missing}; "
                             f"given: {sorted(capacity)}")
        self.capacity = dict(capacity)
        self.ingress_replicas = ingress_replicas
        self.max_job_share = max_job_share
        self._inflight = {name: 0 for name in catalog.names()}
        self._drain = {name: DrainEstimate() for name in catalog.names()}
        self._item_s = {(f.name, t.task): per_item_s(t) for f in catalog.families for t in f.tasks}
        self._answers: dict[str, deque[tuple[float, float]]] = {
            name: deque(maxlen=ANSWERS_KEPT) for name in catalog.names()}

    def answered(self, family: str, path_s: float, now_s: float) -> None:
        """A single request answered `path_s` after it entered this ingress."""
        self._answers[family].append((now_s, path_s))

    def fastest_answer_ms(self, family: str, now_s: float) -> float:
        """The least entry-to-answer time among this ingress's last ANSWERS_KEPT answers of the
        family within ANSWERS_FRESH_S (0: fewer than ANSWERS_MIN of them): what the whole path
        can do at best, model run included. Kept short and recent, and taken over several
        answers, so that a slow answer (a cold replica) cannot refuse every tighter request:
        one slow first answer refused every request of a live benchmark for 30 s at a time."""
        fresh = [s for t, s in self._answers.get(family, ()) if now_s - t <= ANSWERS_FRESH_S]
        return min(fresh) * 1000.0 if len(fresh) >= ANSWERS_MIN else 0.0

    def inflight(self, family: str) -> int:
        return self._inflight[family]

    def begin(self, family: str, items: int) -> None:
        self._inflight[family] += items

    def end(self, family: str, items: int, ahead_items: int = 0,
            latency_s: float | None = None) -> None:
        """Items answered; `latency_s` (send to answer, with `ahead_items` in flight at the
        send) feeds the measured drain estimate."""
        self._inflight[family] = max(0, self._inflight[family] - items)
        if latency_s is not None:
            self._drain[family].record(ahead_items, latency_s)

    def expected_wait_s(self, family: str, task: str) -> float:
        """Time the items already in flight for `family` keep its replicas busy: profiled
        (their per-item time, spread over the replicas) or measured (`DrainEstimate`, which
        also counts the fastest variant's run), whichever is longer."""
        cap = self.capacity[family]
        ahead = self._inflight[family] * self.ingress_replicas
        profiled = ahead * self._item_s[(family, task)] / cap.replicas
        return max(profiled, self._drain[family].wait_s(self._inflight[family]))

    def check(self, family: FamilyInfo, task: TaskInfo, now_s: float,
              deadline_s: float) -> Refusal | None:
        """A refusal when now + expected wait + the fastest variant's batch-1 time is past the
        deadline (so also when the deadline was lost before the request got here)."""
        wait_s = self.expected_wait_s(family.name, task.task)
        fastest = task.fastest()
        fastest_s = fastest.latency_ms / 1000.0
        if now_s + wait_s + fastest_s <= deadline_s:
            return None
        left_ms = (deadline_s - now_s) * 1000.0
        message = (f"{family.name} is overloaded: expected wait {wait_s * 1000:.1f} ms "
                   f"({self._inflight[family.name]} items in flight) + fastest variant "
                   f"{fastest.name} {fastest.latency_ms:.1f} ms exceeds the {left_ms:.1f} ms "
                   f"left before the deadline")
        return Refusal(message, max(1, math.ceil(wait_s)), wait_s)

    def job_room(self, family: str, items: int) -> JobRoom:
        """Items of a job admitted now: at most the family's free queue space at this ingress
        and at most `max_job_share` of its queue, so one huge job cannot take a family's whole
        queue (nor the shared decode time behind it)."""
        cap = self.capacity[family]
        local_queue = cap.max_queued_items * cap.replicas / self.ingress_replicas
        free = max(0, math.floor(local_queue) - self._inflight[family])
        share = max(1, math.floor(self.max_job_share * local_queue))
        admitted = min(items, free, share)
        if admitted == items:
            return JobRoom(items, 0, "")
        limit = ("free queue space" if free < share
                 else f"share of a job ({self.max_job_share:g} of the queue)")
        reason = (f"{family} has room for {admitted} of this job's {items} items "
                  f"({limit}: {min(free, share)} items)")
        return JobRoom(admitted, items - admitted, reason)
