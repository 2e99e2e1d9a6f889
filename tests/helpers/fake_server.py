"""A tiny local aiohttp server standing in for the ingress (POST /v1/classify and /v1/jobs),
for the load generator's tests, and the generator's config against it."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from aiohttp import web

from app.sim.traces.spec import TraceSpec
from bench.core.client import LoadgenConfig


def answer(inputs: dict[str, Any], rid: str) -> tuple[int, dict[str, Any]]:
    """The answer to one item: by its "mode" (429, 500, shed, deadline_exceeded, else ok with
    label "pred")."""
    mode = inputs.get("mode", "ok")
    if mode == "429":
        return 429, {"error": {"type": "overloaded", "message": "try later"}}
    if mode == "500":
        return 500, {"error": {"type": "internal", "message": "boom"}}
    if mode in ("shed", "deadline_exceeded"):
        return 200, {"request_id": rid, "status": mode, "latency_ms": 1.0, "error": "late"}
    decision = {"variant": inputs.get("variant", "big"), "model": "m", "modalities": [],
                "gamma": 0, "expected_accuracy": 0.9, "batch_size": 2, "queue_ms": 3.0,
                "compute_ms": 10.0, "deadline_met": True, "replica": "r0"}
    return 200, {"request_id": rid, "status": "ok", "latency_ms": 12.0, "decision": decision,
                 "prediction": {"label": inputs["pred"], "confidence": 0.8}}


class FakeServer:
    """POST /v1/classify and /v1/jobs in a background thread; `delay_s` per request, plus
    inputs {"mode": "hang"} sleeping `hang_s`."""

    def __init__(self, delay_s: float = 0.0, hang_s: float = 1.2) -> None:
        self.delay_s, self.hang_s = delay_s, hang_s
        self.in_flight = 0
        self.max_in_flight = 0
        self.received: list[float] = []
        self.request_starts: list[str | None] = []  # X-Request-Start of each request
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    async def _handle(self, request: web.Request) -> web.Response:
        self.received.append(time.perf_counter())
        self.request_starts.append(request.headers.get("X-Request-Start"))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            body = await request.json()
            items = body["items"] if request.path == "/v1/jobs" else [body["inputs"]]
            if any(i.get("mode") == "hang" for i in items):
                await asyncio.sleep(self.hang_s)
            if any(i.get("mode") == "proxy_503" for i in items):  # Serve's plain-text refusal
                return web.Response(status=503, text="Request dropped due to backpressure")
            await asyncio.sleep(self.delay_s)
            answers = [answer(i, f"r{k}") for k, i in enumerate(items)]
            if request.path == "/v1/jobs":
                return web.json_response({"job_id": "j1", "results": [a for _, a in answers]})
            status, data = answers[0]
            headers = {"Retry-After": "2"} if status == 429 else None
            return web.json_response(data, status=status, headers=headers)
        finally:
            self.in_flight -= 1

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_post("/v1/classify", self._handle)
        app.router.add_post("/v1/jobs", self._handle)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = self.runner.addresses[0][1]
        self.ready.set()
        self.loop.run_forever()

    def start(self) -> FakeServer:
        self.thread.start()
        assert self.ready.wait(10)
        return self

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def loadgen_config(url: str, qps: float, duration_s: float, **kw: Any) -> LoadgenConfig:
    return LoadgenConfig(url=url, model="m", trace=TraceSpec("constant", qps, duration_s),
                         slo_ms=kw.pop("slo_ms", 1000.0), **kw)
