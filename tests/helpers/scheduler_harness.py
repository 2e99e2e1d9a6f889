"""The pure loop the scheduler tests drive: a virtual clock, service time from the profile,
synthetic profiles and arrival traces."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from policies.profile import LatencyModel, LatencyPoint, Profile, VariantProfile
from policies.schedulers.base import DropReason, PendingItem, Scheduler
from policies.schedulers.plan_types import (
    plan_from_json,
)
from policies.types import Variant

EPS = 1e-9


def _points(fixed_ms: float, per_ms: float, sizes: tuple[int, ...] = (1, 2, 4, 8)
            ) -> tuple[LatencyPoint, ...]:
    return tuple(LatencyPoint(b, fixed_ms + per_ms * b, fixed_ms + per_ms * b,
                              fixed_ms + per_ms * b, fixed_ms + per_ms * b) for b in sizes)


def image_profile() -> Profile:
    spec = [("small", 0.70, 4.0, 1.0), ("mid", 0.80, 8.0, 2.5), ("big", 0.90, 16.0, 5.0)]
    return Profile("img", "test", tuple(VariantProfile(Variant(n, model=n), a, _points(f, p))
                                        for n, a, f, p in spec))


def token_profile() -> Profile:
    out = []
    for task, drop in (("cifar10", 0.0), ("cifar100", 0.1)):
        for gamma, acc, f, p in ((-10, 0.80, 3.0, 1.0), (0, 0.90, 5.0, 2.0), (4, 0.93, 8.0, 3.0)):
            out.append(VariantProfile(Variant(f"vit-{task}-g{gamma}", model=task, gamma=gamma),
                                      acc - drop, _points(f, p)))
    return Profile("vit", "test", tuple(out))


def fusion_profile() -> Profile:
    spec = [(("audio",), 0.77, 2.0, 2.7), (("video",), 0.72, 14.0, 27.0),
            (("audio", "video"), 0.80, 16.0, 30.0)]
    return Profile("fusion", "test", tuple(
        VariantProfile(Variant("+".join(m), model="tvlt", modalities=frozenset(m)), a,
                       _points(f, p)) for m, a, f, p in spec))


@dataclass
class Trace:
    """What the driver saw: finish time per run item, drops, and the batches."""

    finish: dict[str, float] = field(default_factory=dict)
    dropped: dict[str, DropReason] = field(default_factory=dict)
    batches: list[tuple[float, str, tuple[str, ...]]] = field(default_factory=list)
    drop_times: dict[str, float] = field(default_factory=dict)


def drive(scheduler: Scheduler, profile: Profile, arrivals: list[PendingItem],
          max_batch_size: int, percentile: str = "p95") -> Trace:
    """Single replica: whenever idle, ask; drop and run what it says; check the contract."""
    model = LatencyModel.from_profile(profile, percentile)
    todo = sorted(arrivals, key=lambda p: p.arrival_s)
    queue: dict[str, PendingItem] = {}
    trace = Trace()
    now, i = 0.0, 0
    for _ in range(100_000):
        while i < len(todo) and todo[i].arrival_s <= now + EPS:
            queue[todo[i].item_id] = todo[i]
            i += 1
        if not queue:
            if i == len(todo):
                return trace
            now = todo[i].arrival_s
            continue
        pending = tuple(sorted(queue.values(), key=lambda p: (p.deadline_s, p.item_id)))
        load = sum(1 for p in arrivals if now - 1.0 < p.arrival_s <= now)
        decision = scheduler.decide(pending, now, float(load))
        seen: set[str] = set()
        for d in decision.drops:
            assert d.item_id in queue and d.item_id not in seen
            seen.add(d.item_id)
            trace.dropped[d.item_id] = d.reason
            trace.drop_times[d.item_id] = now
            del queue[d.item_id]
        if decision.run is not None:
            ids = decision.run.item_ids
            assert ids, "empty batch"
            assert len(set(ids)) == len(ids) and all(x in queue for x in ids)
            assert len(ids) <= max_batch_size
            assert len({queue[x].task for x in ids}) == 1, "one task per batch"
            trace.batches.append((now, decision.run.variant.name, ids))
            now += model.latency(model.index(decision.run.variant.name), len(ids))
            for x in ids:
                trace.finish[x] = now
                del queue[x]
        elif not decision.drops:
            nxt = todo[i].arrival_s if i < len(todo) else None
            assert decision.wait_s is not None or nxt is not None, "stuck: nothing will wake it"
            wake = now + decision.wait_s if decision.wait_s is not None else float("inf")
            now = min(wake, nxt if nxt is not None else float("inf"))
    raise AssertionError("driver did not terminate")


def poisson(qps: float, duration_s: float, slo_s: float, seed: int = 0,
            tasks: tuple[str, ...] = ("t",)) -> list[PendingItem]:
    rng = random.Random(seed)
    out: list[PendingItem] = []
    t, k = 0.0, 0
    while True:
        t += rng.expovariate(qps)
        if t > duration_s:
            return out
        out.append(PendingItem(f"q{k}", t, t + slo_s, tasks[k % len(tasks)],
                               utility=rng.choice([0.2, 0.5, 1.0])))
        k += 1


def all_accounted(trace: Trace, items: list[PendingItem]) -> None:
    ids = {p.item_id for p in items}
    assert set(trace.finish) | set(trace.dropped) == ids
    assert not set(trace.finish) & set(trace.dropped)


# --- registry and fixed ---------------------------------------------------------------------


def json_round_trip(plan: Any) -> Any:
    """The plan through a JSON file's text and back, checked equal to itself."""
    text = json.dumps(plan.to_json())
    again = plan_from_json(json.loads(text))
    assert again == plan and type(again) is type(plan)
    assert again.plan_id == plan.plan_id and json.loads(text)["plan_id"] == plan.plan_id
    return again
