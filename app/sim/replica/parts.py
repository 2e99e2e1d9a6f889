"""Pieces of the replica simulator (pure): batch service times from a profile, the router in
front of the replicas, the serving stack's front stage and each call's times in the stack."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from app.sim.replica.served import StackDelays
from policies.profile import LatencyModel, Profile, dense_latency_ms

_Z95 = 1.6448536269514722


class ServiceTimes:
    """Batch latency (seconds) per variant name and batch size."""

    def __init__(self, profile: Profile, mode: str, max_batch_size: int | None, seed: int) -> None:
        self.mode = mode
        pct = "p50" if mode == "sampled" else mode
        self.model = LatencyModel.from_profile(profile, pct, max_batch_size)
        self.sigma: dict[str, list[float]] = {}
        if mode == "sampled":
            n = self.model.max_batch_size
            for v in profile.variants:
                p50 = dense_latency_ms(v.latency, "p50", n)
                p95 = dense_latency_ms(v.latency, "p95", n)
                self.sigma[v.variant.name] = [max(0.0, math.log(max(b, a) / a)) / _Z95 if a > 0
                                              else 0.0 for a, b in zip(p50, p95, strict=True)]
        self.rng = np.random.default_rng(seed + 7)

    def __call__(self, variant: str, batch_size: int) -> float:
        median = self.model.latency(self.model.index(variant), batch_size)
        if self.mode != "sampled":
            return median
        sig = self.sigma[variant]
        s = sig[min(batch_size, len(sig)) - 1]
        return float(median * math.exp(s * float(self.rng.standard_normal())))


class Router:
    """Ray Serve's default router (PowerOfTwoChoicesRequestRouter, Ray 2.60): two distinct random
    replicas, the one with fewer ongoing calls wins, ties to the first sampled; or plain
    round-robin. Replicas at `max_ongoing` accept nothing."""

    def __init__(self, routing: str, max_ongoing: int | None, seed: int) -> None:
        self.routing = routing
        self.max_ongoing = max_ongoing
        self.rng = np.random.default_rng(seed + 1)
        self.next_rr = 0

    def pick(self, ongoing: list[int]) -> int | None:
        """A replica for the next call given each replica's ongoing calls (None: all full)."""
        n = len(ongoing)
        cap = self.max_ongoing
        open_ = [k for k in range(n) if cap is None or ongoing[k] < cap]
        if not open_:
            return None
        if self.routing == "round_robin":
            for _ in range(n):
                k = self.next_rr
                self.next_rr = (k + 1) % n
                if cap is None or ongoing[k] < cap:
                    return k
            return None
        if len(open_) == 1:
            return open_[0]
        i, j = (int(x) for x in self.rng.choice(len(open_), size=2, replace=False))
        a, b = open_[i], open_[j]
        return b if ongoing[b] < ongoing[a] else a


class FrontStage:
    """The serving stack in front of the replicas (proxy, ingress, preprocess) as a FIFO stage of
    `servers` servers taking `service_s` per call."""

    def __init__(self, servers: int, service_s: float) -> None:
        self.service_s = service_s
        self._free_s = [0.0] * servers  # heap of the times each server frees up

    def leave_s(self, now_s: float) -> float:
        """When a call entering now leaves the stage."""
        start = max(now_s, heapq.heappop(self._free_s))
        heapq.heappush(self._free_s, start + self.service_s)
        return start + self.service_s

    def add_work(self, now_s: float, work_s: float) -> None:
        """Work that occupies a server without a call waiting for it (a refusal's answer)."""
        if work_s > 0:
            heapq.heappush(self._free_s, max(now_s, heapq.heappop(self._free_s)) + work_s)


@dataclass(frozen=True)
class CallTimes:
    """One call's times in the stack, seconds from its send: it reaches the replica after
    `to_replica_s` and the ingress (where the server's deadline clock starts) after
    `to_ingress_s`; its queue time counts from `queue_from_s`; the answer takes `back_s` back."""

    to_replica_s: float
    to_ingress_s: float
    queue_from_s: float
    back_s: float


def call_times(num_calls: int, overhead_s: float, stack: StackDelays | None) -> list[CallTimes]:
    """A constant `overhead_s` to the replica (queue time from the replica), or per-call times
    sampled from observed calls (queue time from the ingress, as live)."""
    if stack is None:
        return [CallTimes(overhead_s, 0.0, overhead_s, 0.0)] * num_calls
    out = []
    for _ in range(num_calls):
        c = stack.sample()
        out.append(CallTimes(c.to_ingress_s + c.to_replica_s, c.to_ingress_s, c.to_ingress_s,
                             c.back_s))
    return out
