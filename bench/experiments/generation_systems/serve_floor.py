"""Ray Serve's own floor for the generation benchmark (docs/generation.md, "The floor"): the
cheapest Serve app that speaks the benchmark's protocol, with no model behind it, so the idle
TTFT of our systems can be read against what Serve costs before any work is done.

    serve-floor-1hop  the HTTP proxy -> an ingress replica that reads the JSON body and streams
                      a fixed OpenAI-shaped answer itself (the least any Serve app pays)
    serve-floor-2hop  the same ingress calls a second deployment through a streaming
                      DeploymentHandle and relays its chunks (our monolith's shape: ingress ->
                      LLM replica; the disaggregated path adds more hops)

(FastAPI resolves the routes' annotations in this module's globals: its names are imported at
the top.) Both answer `GET /v1/models` (the benchmark's readiness probe). The answer's text is fixed
("floor"), so its accuracy is 0 by design; only its timing is read.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from bench.experiments.generation_systems.systems import FLOOR_KINDS

ANSWER = "floor"


def sse_chunks(model: str, prompt_bytes: int) -> list[str]:
    """An OpenAI chat stream: one content chunk, a finishing chunk with usage, [DONE]."""
    base = {"id": "chatcmpl-floor", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    first = {**base, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                        "content": ANSWER},
                                  "finish_reason": None}]}
    last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_bytes, "completion_tokens": 1,
                      "total_tokens": prompt_bytes + 1}}
    return [f"data: {json.dumps(first)}\n\n", f"data: {json.dumps(last)}\n\n",
            "data: [DONE]\n\n"]


def build(kind: str, model: str) -> Any:
    """The floor app of `kind` (FLOOR_KINDS), ready for `serve.run`."""
    if kind not in FLOOR_KINDS:
        raise ValueError(f"unknown floor {kind!r}; valid: {list(FLOOR_KINDS)}")
    from ray import serve

    api = FastAPI()

    @serve.deployment(name="floor_backend", ray_actor_options={"num_cpus": 0.1})
    class Backend:
        async def __call__(self, prompt_bytes: int) -> AsyncIterator[str]:
            for chunk in sse_chunks(model, prompt_bytes):
                yield chunk

    @serve.deployment(name="floor_ingress", ray_actor_options={"num_cpus": 0.1})
    @serve.ingress(api)
    class Ingress:
        def __init__(self, backend: Any = None) -> None:
            self.backend = None if backend is None else backend.options(stream=True)

        @api.get("/v1/models")
        async def models(self) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": model, "object": "model"}]})

        @api.post("/v1/chat/completions")
        async def chat(self, request: Request) -> StreamingResponse:
            body = await request.body()
            json.loads(body)  # the body is read and parsed, as any server must
            if self.backend is None:
                return StreamingResponse(iter(sse_chunks(model, len(body))),
                                         media_type="text/event-stream")
            return StreamingResponse(self.backend.remote(len(body)),
                                     media_type="text/event-stream")

    return Ingress.bind(Backend.bind()) if kind == "serve-floor-2hop" else Ingress.bind()


def deploy(kind: str, model: str, base_url: str) -> float:
    """Run the floor app on the started Serve; seconds until it answers /v1/models."""
    from ray import serve

    from bench.core import serve as lb

    t = time.perf_counter()
    serve.run(build(kind, model), name="floor", route_prefix="/", blocking=False)
    lb.wait_healthy(base_url + "/v1/models", timeout_s=120.0)
    return time.perf_counter() - t
