"""The classifier replica loop's inputs without Ray: a two-variant toy profile, work items and a
stub batch runner."""

from __future__ import annotations

import time

from deployments.models.base import Prediction
from deployments.wire import WorkItem
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant


def profile() -> Profile:
    """Task "toy.t": "small" (acc 0.7, 5 ms x sqrt(batch)) and "big" (acc 0.9, 10 ms x sqrt)."""
    def vp(name: str, acc: float, ms: float) -> VariantProfile:
        pts = tuple(LatencyPoint(b, ms * b ** 0.5, ms * b ** 0.5, ms * b ** 0.5, ms * b ** 0.5)
                    for b in (1, 2, 4, 8))
        return VariantProfile(Variant(name, name), acc, pts)
    return Profile("toy.t", "cpu", (vp("small", 0.7, 5.0), vp("big", 0.9, 10.0)))


def item(i: int, slo_s: float = 1.0, task: str = "t") -> WorkItem:
    now = time.time()
    return WorkItem(f"i{i}", task, {"x": i}, now, now + slo_s)


def runner(delay_s: float = 0.02, fail: bool = False):  # type: ignore[no-untyped-def]
    """A batch runner sleeping `delay_s` and labelling each item with its "x" (or raising);
    `.calls` records the batch sizes."""
    calls: list[int] = []

    def run(variant: Variant, task: str, items: list[dict]) -> list[Prediction]:  # type: ignore[type-arg]
        calls.append(len(items))
        time.sleep(delay_s)
        if fail:
            raise RuntimeError("boom")
        return [Prediction(int(it["x"]), 0.5) for it in items]
    run.calls = calls  # type: ignore[attr-defined]
    return run
