"""`POST /v1/chat/completions` in the ingress: parse and check the request (parse.py, with
the model's own template and tokenizer counting the prompt), run it through the generation
path (deployments/generation/pipeline.py) and answer in OpenAI's shape, streamed (SSE) or not.

A streamed answer starts only once the first token (or the request's one failure) is back, so
a failure before the first token is a real HTTP status (429/503/504...), not an event inside a
200 stream. The TTFT is measured from the request's arrival (ingress/clock.py: `X-Request-Start` when
believed), as the client sees it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi.responses import JSONResponse, Response, StreamingResponse

from deployments.generation.pipeline import ChatJob, GenerationPipeline, StageTiming
from deployments.generation.prompt import PromptRenderer
from deployments.generation.stage_messages import GenChunk
from deployments.ingress.chat.answers import (
    SSE_HEADERS,
    SSE_MEDIA_TYPE,
    ChunkStream,
    ServedBy,
    Usage,
    answer_headers,
    completion,
)
from deployments.ingress.chat.errors import ChatError
from deployments.ingress.chat.parse import ChatRequest, ContextCheck, parse_chat
from deployments.ingress.chat.schemas import ChatLimits
from deployments.ingress.clock import Arrival
from deployments.ingress.proxy.strict_json import JsonLimits

log = logging.getLogger(__name__)

CHUNK_ERRORS = {"deadline_exceeded": "deadline_exceeded", "invalid_request": "invalid_request",
                "overloaded": "overloaded", "unavailable": "replica_unavailable",
                "error": "internal_error"}


@dataclass(frozen=True)
class ChatModel:
    """The VLM as the ingress serves it."""

    name: str
    context_len: int
    min_ttft_ms: float  # the least TTFT possible (below: 400 slo_unachievable)
    renderer: PromptRenderer
    pipeline: GenerationPipeline


class ChatService:
    def __init__(self, model: ChatModel, limits: ChatLimits, json_limits: JsonLimits) -> None:
        self.model = model
        self.limits = limits
        self.json_limits = json_limits
        facts = model.renderer.facts
        specials = tuple(v for v in model.renderer.specials.values() if v)
        self.context = ContextCheck(model.context_len, model.renderer.count,
                                    model.renderer.render, model.renderer.tokens_for,
                                    reserved=(facts.image_token, *specials))

    def parse(self, body: bytes, headers: Mapping[str, str]) -> ChatRequest:
        return parse_chat(body, self.limits, [self.model.name], headers=headers,
                          min_ttft_ms=self.model.min_ttft_ms, context=self.context,
                          json_limits=self.json_limits)

    async def answer(self, body: bytes, headers: Mapping[str, str], arrival: Arrival) -> Response:
        try:
            req = self.parse(body, headers)
        except ChatError as exc:
            return exc.response()
        assert req.prompt is not None and req.prompt_tokens is not None
        job = ChatJob(req.request_id, req.prompt, req.prompt_tokens,
                      tuple(i.data for i in req.images), req.max_tokens, arrival.time_s,
                      arrival.time_s + req.ttft_slo_ms / 1000.0, req.sampling,
                      req.image_tokens)
        chunks = self.model.pipeline.run(job).__aiter__()
        wait_s = max(0.0, job.ttft_deadline_s - time.time()) + self.limits.ttft_grace_s
        try:  # the deadline holds even where a stage never answers (no live replica)
            first = await asyncio.wait_for(chunks.__anext__(), timeout=wait_s)
        except StopAsyncIteration:
            first = GenChunk(finished=True, status="error", message="no answer from the LLM")
        except TimeoutError:
            await _close(chunks)
            return ChatError("deadline_exceeded", "no first token by the TTFT deadline (+ "
                             f"{self.limits.ttft_grace_s:g} s): a generation stage did not "
                             "answer in time").response()
        except Exception as exc:
            return _stage_failure(exc).response()
        if first.status != "ok":
            return _chunk_error(first).response()
        ttft_ms = (time.time() - arrival.time_s) * 1000.0
        served = ServedBy(ttft_ms, ttft_ms <= req.ttft_slo_ms, self.model.pipeline.path)  # type: ignore[arg-type]
        if req.stream:
            return StreamingResponse(self._stream(req, first, chunks, served),
                                     media_type=SSE_MEDIA_TYPE,
                                     headers={**SSE_HEADERS, **answer_headers(req)})
        return await self._whole(req, first, chunks, served)

    async def _whole(self, req: ChatRequest, first: GenChunk, chunks: AsyncIterator[GenChunk],
                     served: ServedBy) -> Response:
        text, last = [first.text], first
        try:
            while not last.finished:
                last = await chunks.__anext__()
                text.append(last.text)
        except Exception as exc:
            return _stage_failure(exc).response()
        if last.status != "ok":
            return _chunk_error(last).response()
        usage = Usage(last.prompt_tokens or req.prompt_tokens or 0, last.completion_tokens or 0)
        body = completion(req, "".join(text), last.finish_reason or "stop",  # type: ignore[arg-type]
                          usage, int(time.time()), served)
        return JSONResponse(body, headers=answer_headers(req))

    async def _stream(self, req: ChatRequest, first: GenChunk, chunks: AsyncIterator[GenChunk],
                      served: ServedBy) -> AsyncIterator[bytes]:
        out = ChunkStream(req, int(time.time()))
        chunk = first
        try:
            while True:
                if chunk.status != "ok":
                    yield out.fail(_chunk_error(chunk))
                    return
                if chunk.text:
                    yield out.delta(chunk.text)
                if chunk.finished:
                    usage = Usage(chunk.prompt_tokens or req.prompt_tokens or 0,
                                  chunk.completion_tokens or 0)
                    yield out.finish(chunk.finish_reason or "stop", usage, served)  # type: ignore[arg-type]
                    return
                chunk = await chunks.__anext__()
        except StopAsyncIteration:
            yield out.fail(ChatError("internal_error", "the LLM stage ended the stream early"))
        except Exception as exc:
            yield out.fail(_stage_failure(exc))


async def _close(chunks: AsyncIterator[GenChunk]) -> None:
    try:
        await chunks.aclose()  # type: ignore[attr-defined]
    except Exception as exc:  # already cancelled mid-call: nothing left to stop
        log.debug("closing an abandoned stream: %s", exc)


def _chunk_error(chunk: GenChunk) -> ChatError:
    code = CHUNK_ERRORS.get(chunk.status, "internal_error")
    retry = 1.0 if code in ("overloaded", "replica_unavailable") else None
    return ChatError(code, chunk.message or code, retry_after_s=retry)


def _stage_failure(exc: BaseException) -> ChatError:
    """A stage call that raised (a replica died, Serve had none): 503, never a bare 500."""
    log.warning("generation stage failed: %s: %s", type(exc).__name__, exc)
    return ChatError("replica_unavailable", f"a generation stage failed: {type(exc).__name__}",
                     retry_after_s=1.0)




def chat_service(graph: Any, http: Any,
                 on_timing: Callable[[StageTiming], None] | None = None) -> ChatService:
    """The service of an `app.chat_graph.ChatGraph` (settings, model directory, chat template
    override, stage handles); the model directory's prompt files are read from its path on this
    node, once checked to be the builder's (`ModelDir.verified`); `on_timing`: each request's
    stage timing (the ingress's metrics)."""
    from deployments.ingress.chat.config import GenerationConfig

    cfg = dict(graph.config)
    context = int(cfg.pop("context_len"))
    g = GenerationConfig.model_validate(cfg)
    renderer = PromptRenderer(graph.model.verified(), graph.chat_template)
    pipeline = GenerationPipeline(graph.llm, graph.encoder, renderer.facts.tokens_per_image,
                                  count_image_tokens=g.architecture == "decoder_only",
                                  fan_out=g.encoder.fan_out, on_timing=on_timing)
    model = ChatModel(g.model, context, g.min_ttft_ms, renderer, pipeline)
    limits = (g.limits if renderer.facts.image_token_id is not None  # text-only: no images
              else g.limits.model_copy(update={"max_images": 0}))
    return ChatService(model, limits, JsonLimits(http.max_json_depth,
                                                   http.max_json_number_chars))
