"""The chat route answers by the TTFT deadline even when a generation stage never answers (its
deployment has no schedulable replica: Serve's handle then waits, silently, for one): a 504
`deadline_exceeded` at deadline + `ttft_grace_s`, not the proxy's timeout a minute later. The
stage handle is faked (Serve's handle is not ours); the service, pipeline and parser are real."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from deployments.generation.pipeline import GenerationPipeline
from deployments.ingress.chat.schemas import ChatLimits
from deployments.ingress.chat.service import ChatModel, ChatService
from deployments.ingress.clock import Arrival, StartSource
from deployments.ingress.proxy.strict_json import JsonLimits


class _NeverAnswers:
    """A stage handle whose calls wait forever (no replica to take them)."""

    def __init__(self) -> None:
        self.calls = 0
        self.closed = 0
        self.generate = self

    def options(self, **_: Any) -> _NeverAnswers:
        return self

    def remote(self, *_: Any) -> AsyncIterator[Any]:
        self.calls += 1
        return self._forever()

    async def _forever(self) -> AsyncIterator[Any]:
        try:
            await asyncio.sleep(3600)
            yield None
        finally:
            self.closed += 1


def test_a_stage_that_never_answers_gets_a_504_by_the_deadline(both: Any) -> None:
    _, renderer = both
    llm = _NeverAnswers()
    model = ChatModel("vlm", 256, 5.0, renderer, GenerationPipeline(llm, None, 64))
    service = ChatService(model, ChatLimits(ttft_grace_s=0.2), JsonLimits())
    body = json.dumps({"model": "vlm", "messages": [{"role": "user", "content": "hi"}],
                       "slo": {"ttft_ms": 300}}).encode()

    async def ask() -> tuple[Any, float]:
        start = time.time()
        r = await service.answer(body, {}, Arrival(start, start, StartSource.ENTRY))
        return r, time.time() - start
    # a hang guard only: without the service's own bound the call waits forever
    r, took = asyncio.run(asyncio.wait_for(ask(), timeout=60))
    assert r.status_code == 504, r.body
    assert json.loads(r.body)["error"]["code"] == "deadline_exceeded"
    assert took >= 0.45  # held until the 0.3 s SLO + 0.2 s grace (timers never fire early)
    assert llm.calls == 1 and llm.closed == 1  # the abandoned call is closed
