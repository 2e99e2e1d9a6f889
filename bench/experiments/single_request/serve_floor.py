"""Ray Serve's own floor for single `/v1/classify` requests: the cheapest Serve app with the
app's shape, no model behind it, so the app's path can be read against what Serve costs before
any work is done (docs/live.md, "The serving path against Serve's floor").

    HTTP proxy -> a FastAPI ingress that reads and validates the request (`ClassifyRequest`, as
    the app does) -> one `DeploymentHandle` call -> a deployment that returns a constant answer

Served under /<FLOOR_NAME> with Serve's throughput settings (deployments/config.py
THROUGHPUT_ENV, gRPC from the proxy) but without the app's front-door middleware, which is the
app's own path, not Serve's. The answer is the app's response shape with a fixed label (0) and
no compute, so only its timing and CPU are read; its accuracy is meaningless by design.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from ray import serve
from ray.serve import Application

from bench.experiments.single_request.bare_graph import CPU_OPTIONS, MODEL_OPTIONS, bare_response
from deployments.ingress.classify.schemas import ClassifyRequest

api = FastAPI(title="adaptserve-serve-floor")
FLOOR_NAME = "floor"
CONSTANT = {"label": 0, "confidence": 1.0, "variant": "constant", "model": "constant",
            "modalities": [], "gamma": 0, "batch_size": 1, "compute_ms": 0.0}


@serve.deployment(max_ongoing_requests=2048)
class ConstantModel:
    """The model deployment of the floor: a constant answer, nothing computed."""

    def __init__(self) -> None:
        self.replica = serve.get_replica_context().replica_tag

    async def infer(self, body_bytes: int) -> dict[str, Any]:
        return {**CONSTANT, "replica": self.replica, "body_bytes": body_bytes}


@serve.deployment(max_ongoing_requests=2048, ray_actor_options=CPU_OPTIONS)
@serve.ingress(api)
class FloorIngress:
    def __init__(self, model: Any) -> None:
        self.model = model

    @api.post("/v1/classify")
    async def classify(self, request: Request) -> JSONResponse:
        start = time.perf_counter()
        body = await request.body()
        try:
            req = ClassifyRequest.model_validate_json(body)
        except ValidationError as exc:
            return JSONResponse({"error": {"type": "invalid_request", "message": str(exc)}}, 422)
        result = await self.model.infer.remote(len(body))
        latency_ms = 1000.0 * (time.perf_counter() - start)
        return JSONResponse(bare_response(result, latency_ms, req.slo.latency_ms).model_dump())

    @api.get("/healthz")
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}


def build_floor_app() -> Application:
    """The floor, its model deployment on the app's classifier resources (0.5 CPU)."""
    return FloorIngress.bind(ConstantModel.options(ray_actor_options=MODEL_OPTIONS).bind())


def deploy_floor(base_url: str) -> float:
    """Deploy the floor under /<FLOOR_NAME> and wait for its /healthz; seconds taken."""
    from bench.core import serve as local_serve

    return local_serve.deploy(build_floor_app(), FLOOR_NAME, "/" + FLOOR_NAME,
                              f"{base_url}/{FLOOR_NAME}/healthz")
