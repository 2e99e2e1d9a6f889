"""The chat route's answers from what the LLM stage streams: a failure mid-stream is an SSE
error event, a stream that ends without its final chunk is an error too (never a silent cut),
and `adaptserve.deadline_met` tells whether the TTFT SLO held. The LLM stage's handle is
scripted (Serve's handle is not ours); the service, pipeline and parser are real."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse

from deployments.generation.pipeline import GenerationPipeline
from deployments.generation.stage_messages import GenChunk
from deployments.ingress.chat.schemas import ChatLimits
from deployments.ingress.chat.service import ChatModel, ChatService
from deployments.ingress.clock import Arrival, StartSource
from deployments.ingress.proxy.strict_json import JsonLimits

DONE = "[DONE]"


class _ScriptedLLM:
    """An LLM stage handle streaming the same scripted chunks for every call."""

    def __init__(self, chunks: list[GenChunk]) -> None:
        self.chunks = chunks
        self.generate = self

    def options(self, **_: Any) -> _ScriptedLLM:
        return self

    def remote(self, *_: Any) -> AsyncIterator[GenChunk]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[GenChunk]:
        for chunk in self.chunks:
            await asyncio.sleep(0)
            yield chunk


def _service(renderer: Any, chunks: list[GenChunk]) -> ChatService:
    model = ChatModel("vlm", 256, 5.0, renderer, GenerationPipeline(_ScriptedLLM(chunks), None, 64))
    return ChatService(model, ChatLimits(), JsonLimits())


def _ask(service: ChatService, stream: bool, ttft_ms: float = 60_000.0,
         arrived_s_ago: float = 0.0) -> tuple[int, list[Any]]:
    """(status, body): the JSON body, or the SSE events' data in order (JSON or "[DONE]")."""
    body = json.dumps({"model": "vlm", "messages": [{"role": "user", "content": "hi"}],
                       "stream": stream, "slo": {"ttft_ms": ttft_ms}}).encode()

    async def go() -> tuple[int, list[Any]]:
        t = time.time() - arrived_s_ago
        r = await service.answer(body, {}, Arrival(t, t, StartSource.ENTRY))
        if not isinstance(r, StreamingResponse):
            return r.status_code, [json.loads(r.body)]
        raw = b"".join([b if isinstance(b, bytes) else b.encode()
                        async for b in r.body_iterator]).decode()
        events = [e.removeprefix("data: ") for e in raw.split("\n\n") if e]
        return r.status_code, [e if e == DONE else json.loads(e) for e in events]
    return asyncio.run(asyncio.wait_for(go(), timeout=30))


def _text(events: list[Any]) -> str:
    return "".join(c["delta"].get("content", "") for e in events if isinstance(e, dict)
                   for c in e.get("choices", []))


OK = [GenChunk("sev", 1), GenChunk("en", 1),
      GenChunk(finished=True, finish_reason="stop", prompt_tokens=9, completion_tokens=2)]


def test_a_whole_stream_ends_with_finish_reason_and_done(both: Any) -> None:
    status, events = _ask(_service(both[1], OK), stream=True)
    assert status == 200
    assert _text(events) == "seven" and events[-1] == DONE
    last = events[-2]
    assert last["choices"][0]["finish_reason"] == "stop"
    assert last["adaptserve"]["deadline_met"] is True
    assert not any("error" in e for e in events if isinstance(e, dict))


def test_a_failure_mid_stream_is_an_error_event(both: Any) -> None:
    chunks = [GenChunk("sev", 1), GenChunk(finished=True, status="unavailable",
                                           message="the replica died")]
    status, events = _ask(_service(both[1], chunks), stream=True)
    assert status == 200  # the first token had gone out: the failure is inside the stream
    assert _text(events) == "sev"
    assert events[-1] == DONE
    error = events[-2]["error"]
    assert error["code"] == "replica_unavailable" and "replica died" in error["message"]
    assert not any(c.get("finish_reason") for e in events if isinstance(e, dict)
                   for c in e.get("choices", []))


def test_a_stream_ending_without_its_final_chunk_is_an_error_event(both: Any) -> None:
    status, events = _ask(_service(both[1], OK[:2]), stream=True)
    assert status == 200
    assert _text(events) == "seven" and events[-1] == DONE
    assert events[-2]["error"]["code"] == "internal_error"
    assert "early" in events[-2]["error"]["message"]


def test_a_whole_answer_cut_short_or_failing_is_an_error(both: Any) -> None:
    status, [body] = _ask(_service(both[1], OK[:2] + [GenChunk(finished=True,
                                                              status="overloaded")]), False)
    assert status == 429 and body["error"]["code"] == "overloaded"
    status, [body] = _ask(_service(both[1], OK[:2]), stream=False)
    assert status == 503 and body["error"]["code"] == "replica_unavailable"


def test_a_deadline_lost_before_the_first_token_is_a_504(both: Any) -> None:
    lost = [GenChunk(finished=True, status="deadline_exceeded", message="lost before prefill")]
    for stream in (True, False):
        status, [body] = _ask(_service(both[1], lost), stream=stream)
        assert status == 504 and body["error"]["code"] == "deadline_exceeded"


def test_deadline_met_tells_whether_the_ttft_slo_held(both: Any) -> None:
    service = _service(both[1], OK)
    # arrived (by its X-Request-Start) 5 s before its first token, with a 1 s TTFT SLO
    status, [body] = _ask(service, stream=False, ttft_ms=1000.0, arrived_s_ago=5.0)
    assert status == 200 and body["choices"][0]["message"]["content"] == "seven"
    assert body["adaptserve"]["deadline_met"] is False
    assert body["adaptserve"]["ttft_ms"] >= 5000.0
    _, events = _ask(service, stream=True, ttft_ms=1000.0, arrived_s_ago=5.0)
    assert events[-2]["adaptserve"]["deadline_met"] is False
    _, [body] = _ask(service, stream=False, ttft_ms=60_000.0)
    assert body["adaptserve"]["deadline_met"] is True
