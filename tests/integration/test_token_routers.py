"""The token-aware routers in a real Ray Serve (deployments/generation/routers.py): a deployment
of three replicas that hold calls for a while and report their pending tokens; one heavy call
loads one replica, and the light calls after it must all go elsewhere, both from the router that
sent the heavy call (its own in-flight count) and from another process's router that only knows
it from the replicas' `record_routing_stats` reports. A router counting requests (Serve's
power-of-two, least-requests) would send some of them to the heavy replica, which holds the
fewest requests."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from ray import serve

from bench.core.http import free_port
from deployments.generation.routers import ReportsPendingTokens, image_token_router_config

pytestmark = pytest.mark.integration

APP = "token-routers"
HEAVY_TOKENS = 10_000
LIGHT_TOKENS = 10
STATS_PERIOD_S = 0.5


@serve.deployment(num_replicas=3, max_ongoing_requests=32,
                  ray_actor_options={"num_cpus": 0.01},
                  request_router_config=image_token_router_config(STATS_PERIOD_S, seed=0))
class Holder(ReportsPendingTokens):
    """Holds each call `hold_s` while counting its route tokens; answers its replica id."""

    async def work(self, hold_s: float, route_tokens: int) -> str:
        with self.holding_tokens(route_tokens):
            await asyncio.sleep(hold_s)
        return serve.get_replica_context().replica_id.unique_id


@serve.deployment(ray_actor_options={"num_cpus": 0.01})
class Caller:
    """Another process, so another router (it never sees the driver's calls)."""

    def __init__(self, holder: Any) -> None:
        self.holder = holder

    async def send(self, n: int, hold_s: float, tokens: int, gap_s: float) -> list[str]:
        calls = []
        for _ in range(n):
            calls.append(self.holder.work.remote(hold_s, route_tokens=tokens))
            await asyncio.sleep(gap_s)
        return list(await asyncio.gather(*calls))


@pytest.fixture(scope="module")
def handles() -> Iterator[tuple[Any, Any]]:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray

    from bench.core import serve as lb

    own = not ray.is_initialized()  # else: the session's Ray and Serve (tests/integration/conftest)
    temp_dir = tempfile.mkdtemp(prefix="ray-tr-", dir="/tmp")
    if own:
        lb.start_ray(free_port(), num_cpus=2, temp_dir=temp_dir)
    try:
        caller = serve.run(Caller.bind(Holder.bind()), name=APP, route_prefix=None)
        holder = serve.get_deployment_handle("Holder", app_name=APP)
        seen: set[str] = set()
        for _ in range(10):  # until the driver's router has routed to all three
            seen |= {r.result() for r in [holder.work.remote(0.2, route_tokens=1)
                                          for _ in range(3)]}
            if len(seen) == 3:
                break
        assert len(seen) == 3, seen
        yield caller, holder
    finally:
        if own:
            lb.stop_ray()
        else:
            serve.delete(APP)
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_the_sending_router_keeps_light_calls_off_the_heavy_replica(
        handles: tuple[Any, Any]) -> None:
    _, holder = handles
    heavy = holder.work.remote(6.0, route_tokens=HEAVY_TOKENS)
    time.sleep(0.3)
    lights = []
    for _ in range(6):
        lights.append(holder.work.remote(3.0, route_tokens=LIGHT_TOKENS))
        time.sleep(0.15)
    placed = [r.result(timeout_s=30) for r in lights]
    heavy_replica = heavy.result(timeout_s=30)
    assert heavy_replica not in placed, (heavy_replica, placed)
    # the two others alternate (fewest tokens, then fewest requests): by the third light call
    # each of them holds more requests than the heavy replica, which least-requests would pick
    assert sorted(Counter(placed).values()) == [3, 3], placed


def test_another_router_learns_the_heavy_replica_from_reports(handles: tuple[Any, Any]) -> None:
    caller, holder = handles
    heavy = holder.work.remote(7.0, route_tokens=HEAVY_TOKENS)
    time.sleep(5 * STATS_PERIOD_S)  # a few reports reach the caller's router
    placed = caller.send.remote(6, 2.0, LIGHT_TOKENS, 0.15).result(timeout_s=30)
    heavy_replica = heavy.result(timeout_s=30)
    assert len(set(placed)) == 2 and heavy_replica not in placed, (heavy_replica, placed)

