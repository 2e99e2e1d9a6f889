"""The LLM stage's deadlines (deployments/generation/llm.py): a request whose TTFT deadline is
already lost is answered `deadline_exceeded` without reaching the engine, and waiting requests
run earliest deadline first, not in arrival order. The replica runs without Serve or a model:
its engine is a scripted stand-in for vLLM / transformers taking turns by engine priority
through the real `Turns` (the transformers engine's scheduler)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from deployments.autoscaling.decisions import IMAGE_TOKENS, TEXT_TOKENS
from deployments.autoscaling.reporting import ArrivalRates
from deployments.engines import GenerationRequest, TokenDelta
from deployments.engines.turns import Turns
from deployments.generation.llm import LLMBackend, LLMSettings
from deployments.generation.stage_messages import GenChunk, GenerateCall


class _Engine:
    """One request at a time by priority; each answers its request id, then finishes."""

    def __init__(self) -> None:
        self.turns = Turns()
        self.started: list[str] = []

    async def generate(self, request: GenerationRequest) -> AsyncIterator[TokenDelta]:
        await self.turns.acquire(request.priority)
        try:
            self.started.append(request.request_id)
            await asyncio.sleep(0)
            yield TokenDelta(request.request_id, (1,))
            yield TokenDelta("", (), True, "stop", 3, 1)
        finally:
            self.turns.release()

    def shutdown(self) -> None:  # the replica's __del__ stops its engine
        self.turns = Turns()


def _replica(**settings: Any) -> Any:
    cls = LLMBackend.func_or_class
    replica = cls.__new__(cls)
    replica.settings, replica.epoch_s, replica.in_flight = LLMSettings(**settings), 0.0, 0
    replica.tokens_per_image = 10
    replica.arrivals = ArrivalRates((TEXT_TOKENS, IMAGE_TOKENS), 5.0)
    replica.engine = _Engine()
    return replica


def _call(rid: str, arrival_s: float, deadline_s: float) -> GenerateCall:
    return GenerateCall(rid, "hi", 4, arrival_s, deadline_s, 3, 0, route_tokens=3)


async def _chunks(replica: Any, call: GenerateCall) -> list[GenChunk]:
    return [c async for c in replica.generate(call, [])]


def test_a_deadline_lost_before_prefill_never_reaches_the_engine() -> None:
    replica = _replica()
    now = time.time()
    [chunk] = asyncio.run(_chunks(replica, _call("late", now - 10.0, now - 1.0)))
    assert chunk.finished and chunk.status == "deadline_exceeded"
    assert replica.engine.started == []
    # with time to spare it runs
    chunks = asyncio.run(_chunks(replica, _call("fine", now, now + 600.0)))
    assert [c.text for c in chunks] == ["fine", ""] and chunks[-1].status == "ok"
    assert replica.engine.started == ["fine"]


def _order(replica: Any) -> list[str]:
    """A request holds the engine while two wait: `relaxed` arrived first with the later
    deadline, `urgent` second with the earlier one. The order the engine started them."""
    now = time.time()

    async def main() -> list[str]:
        engine = replica.engine
        await engine.turns.acquire(0)  # a request is running: the two below wait
        relaxed = asyncio.ensure_future(_chunks(replica, _call("relaxed", now, now + 500.0)))
        urgent = asyncio.ensure_future(_chunks(replica, _call("urgent", now + 0.1, now + 100.0)))
        while engine.turns.waiting < 2:  # both queued behind the running one
            await asyncio.sleep(0)
        engine.turns.release()
        for out in await asyncio.gather(relaxed, urgent):
            assert out[-1].finished and out[-1].status == "ok"
        return list(engine.started)
    return asyncio.run(asyncio.wait_for(main(), timeout=30))


def test_waiting_requests_run_earliest_deadline_first() -> None:
    assert _order(_replica()) == ["urgent", "relaxed"]


def test_fifo_priority_runs_them_in_arrival_order() -> None:
    assert _order(_replica(priority="fifo")) == ["relaxed", "urgent"]
