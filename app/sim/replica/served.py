"""What a live run tells the simulator about serving as it really happens (pure).

A profile measures each variant alone on an idle core. In a live replica a batch also pays the
hand-off to the model thread, the numpy-to-tensor conversion and the neighbours on a shared
machine, and every call spends time in the stack: HTTP and the proxy to the ingress (where the
server's deadline clock starts), preprocess and the Ray calls to the replica's queue, and the way
back. Both are measured per answered item by the live server (the decision's `compute_ms` and
`dispatch_ms`, the answer's server `latency_ms`) and recorded by the load generator.

- `ServedTimes`: batch times sampled from those measured for the same (variant, batch size);
  pairs never seen fall back to the profile's p50 times the median live/profile ratio.
- `StackDelays`: per-call stack times sampled from the observed calls (bootstrap).

Both are built from calibration runs, never from the run a simulation predicts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from app.sim.replica.request_metrics import RequestRecord
from policies.profile import Profile


@dataclass(frozen=True)
class CallTiming:
    """One call's time in the serving stack, seconds."""

    to_ingress_s: float  # client send -> ingress (HTTP, proxy, Ray call)
    to_replica_s: float  # ingress -> the replica's queue (preprocess, Ray calls)
    back_s: float  # end of the call's last batch -> the client has the answer


def call_timings(records: Iterable[RequestRecord]) -> list[CallTiming]:
    """One `CallTiming` per call with every item answered ok and timed by the server. The HTTP
    part (client latency - server latency) is split evenly between the way in and the way out:
    the client cannot see where the proxy spent it."""
    calls: dict[str, list[RequestRecord]] = defaultdict(list)
    for i, r in enumerate(records):
        calls[r.job_id or f"item-{i}"].append(r)
    out = []
    for items in calls.values():
        if any(r.outcome != "ok" or r.latency_ms is None or r.server_ms is None
               or r.dispatch_ms is None or r.queue_ms is None or r.compute_ms is None
               for r in items):
            continue
        first = items[0]
        latency, server = first.latency_ms or 0.0, first.server_ms or 0.0  # checked above
        http_ms = max(latency - server, 0.0)
        done_ms = max((r.queue_ms or 0.0) + (r.compute_ms or 0.0) for r in items)
        out.append(CallTiming(to_ingress_s=http_ms / 2000.0,
                              to_replica_s=max(first.dispatch_ms or 0.0, 0.0) / 1000.0,
                              back_s=(max(server - done_ms, 0.0) + http_ms / 2) / 1000.0))
    return out


class StackDelays:
    """Draws observed calls' stack times at random (with replacement)."""

    def __init__(self, timings: list[CallTiming], seed: int = 0) -> None:
        if not timings:
            raise ValueError("no call timings to sample from")
        self.timings = timings
        self.rng = np.random.default_rng(seed + 11)

    def sample(self) -> CallTiming:
        return self.timings[int(self.rng.integers(len(self.timings)))]

    def p50_total_ms(self) -> float:
        return float(np.median([1000 * (t.to_ingress_s + t.to_replica_s + t.back_s)
                                for t in self.timings]))


class ServedTimes:
    """Batch seconds for (variant, batch size): a measured live batch time of that pair, else
    the profile's p50 scaled by the median live/profile ratio over all measured batches."""

    def __init__(self, records: Iterable[RequestRecord], profile: Profile, seed: int = 0,
                 min_samples: int = 5) -> None:
        self.p50 = {k: ms / 1000.0 for k, ms in profile.p50_ms_table().items()}
        # every item of a batch carries the batch's time; for one (variant, size) sampling items
        # uniformly is sampling batches uniformly
        items: dict[tuple[str, int], list[float]] = defaultdict(list)
        for r in records:
            if (r.outcome == "ok" and r.variant is not None and r.batch_size is not None
                    and r.compute_ms is not None):
                items[(r.variant, r.batch_size)].append(r.compute_ms / 1000.0)
        self.samples = {k: np.array(v) for k, v in items.items()
                        if len(v) >= min_samples * k[1]}
        ratios = [t / self.p50[k] for k, arr in self.samples.items() if k in self.p50
                  for t in arr]
        self.factor = float(np.median(ratios)) if ratios else 1.0
        self.rng = np.random.default_rng(seed + 13)

    def __call__(self, variant: str, batch_size: int) -> float:
        arr = self.samples.get((variant, batch_size))
        if arr is not None:
            return float(arr[int(self.rng.integers(len(arr)))])
        known = [b for (v, b) in self.p50 if v == variant]
        if not known:
            raise KeyError(f"variant {variant!r} is not in the profile")
        b = min(known, key=lambda x: (abs(x - batch_size), x))  # profiles cover 1..max batch
        return self.p50[(variant, b)] * self.factor
