"""A bare Ray Serve graph with the same hops as the app, for the overhead comparison.

FastAPI ingress -> preprocess (decode) -> model deployment that runs one fixed variant on what
`@serve.batch` collects (no deadline queue, no scheduler, no controller). It answers
POST /v1/classify with the app's `ClassifyResponse` (status always "ok"), reporting the model's
compute time per request in `decision.compute_ms`, and GET /healthz.

    serve.run(build_bare_app(BareSettings("family", ".cache/models", "vit_base")), name="bare",
              route_prefix="/bare")
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from ray import serve
from ray.serve import Application

from deployments.ingress.classify.schemas import (
    ClassifyRequest,
    ClassifyResponse,
    Decision,
    PredictionOut,
)

api = FastAPI(title="adaptserve-bare")
CPU_OPTIONS = {"num_cpus": 0.1}
MODEL_OPTIONS = {"num_cpus": 0.5}


DEFAULT_LOADER = "deployments.models.registry:load_model"


@dataclass(frozen=True)
class BareSettings:
    """What the bare graph serves: `variant` of `family`'s `task` (None: its first task)."""

    family: str
    models_dir: str
    variant: str
    task: str | None = None
    max_batch_size: int = 8
    num_replicas: int = 1
    model_actor_options: dict[str, Any] = field(default_factory=dict)  # empty: MODEL_OPTIONS
    expected_accuracy: float = 0.0
    loader: str = DEFAULT_LOADER  # "module:function"; tests pass a fake family's loader


def _load(family: str, models_dir: str, loader: str = DEFAULT_LOADER) -> Any:
    """`loader(family, cache_dir=..., device="cpu")` named by "module:function" (tests pass a
    fake family's loader)."""
    import importlib

    import torch

    module, _, func = loader.partition(":")
    torch.set_num_threads(1)
    return getattr(importlib.import_module(module), func)(family, cache_dir=Path(models_dir),
                                                          device="cpu")


@serve.deployment(max_ongoing_requests=2048)
class BareModel:
    """Runs every batch on `variant` of the family's `task`."""

    def __init__(self, settings: BareSettings) -> None:
        self.model = _load(settings.family, settings.models_dir, settings.loader)
        self.task = settings.task or self.model.tasks()[0]
        by_name = {v.name: v for v in self.model.variants()}
        if settings.variant not in by_name:
            raise ValueError(f"unknown variant {settings.variant!r}; valid: {sorted(by_name)}")
        self.variant = by_name[settings.variant]
        self.infer.set_max_batch_size(settings.max_batch_size)
        self.replica = serve.get_replica_context().replica_tag

    def _run(self, items: list[dict[str, Any]]) -> list[Any]:
        import torch

        with torch.inference_mode():
            return list(self.model.run(self.variant, self.task, items))

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.0)
    async def infer(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # compute = the worker-thread call, timed from the event loop as the app's replica does
        start = time.perf_counter()
        preds = await asyncio.to_thread(self._run, items)
        compute_ms = 1000.0 * (time.perf_counter() - start)
        v = self.variant
        return [{"label": int(p.label), "confidence": float(p.confidence), "variant": v.name,
                 "model": v.model or v.name, "modalities": sorted(v.modalities),
                 "gamma": v.gamma, "batch_size": len(items), "compute_ms": compute_ms,
                 "replica": self.replica} for p in preds]


@serve.deployment(max_ongoing_requests=2048, ray_actor_options=CPU_OPTIONS)
class BarePreprocess:
    def __init__(self, settings: BareSettings, model: Any) -> None:
        self.model = _load(settings.family, settings.models_dir, settings.loader)
        self.task = settings.task or self.model.tasks()[0]
        self.handle = model

    async def classify(self, inputs: dict[str, Any]) -> dict[str, Any]:
        tensors = await asyncio.to_thread(self.model.decode, inputs, self.task)
        return await self.handle.infer.remote(tensors)


def bare_response(result: dict[str, Any], latency_ms: float, slo_ms: float) -> ClassifyResponse:
    """The app's response shape for one bare answer (queue time: what is not compute)."""
    compute = float(result["compute_ms"])
    decision = Decision(variant=result["variant"], model=result["model"],
                        modalities=list(result["modalities"]), gamma=int(result["gamma"]),
                        expected_accuracy=float(result.get("expected_accuracy", 0.0)),
                        batch_size=int(result["batch_size"]),
                        queue_ms=max(latency_ms - compute, 0.0), compute_ms=compute,
                        deadline_met=latency_ms <= slo_ms, replica=str(result["replica"]))
    return ClassifyResponse(request_id=uuid.uuid4().hex, status="ok",
                            prediction=PredictionOut(label=int(result["label"]),
                                                     confidence=float(result["confidence"])),
                            decision=decision, latency_ms=latency_ms)


@serve.deployment(max_ongoing_requests=2048, ray_actor_options=CPU_OPTIONS)
@serve.ingress(api)
class BareIngress:
    def __init__(self, preprocess: Any, expected_accuracy: float = 0.0) -> None:
        self.preprocess = preprocess
        self.expected_accuracy = expected_accuracy

    @api.post("/v1/classify")
    async def classify(self, request: Request) -> JSONResponse:
        start = time.perf_counter()
        try:
            req = ClassifyRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            return JSONResponse({"error": {"type": "invalid_request", "message": str(exc)}}, 422)
        try:
            result = await self.preprocess.classify.remote(req.inputs)
        except Exception as exc:
            return JSONResponse({"error": {"type": "internal_error",
                                           "message": f"{type(exc).__name__}: {exc}"}}, 500)
        result["expected_accuracy"] = self.expected_accuracy
        latency_ms = 1000.0 * (time.perf_counter() - start)
        return JSONResponse(bare_response(result, latency_ms, req.slo.latency_ms).model_dump())

    @api.get("/healthz")
    async def healthz(self) -> dict[str, str]:
        return {"status": "ok"}


def build_bare_app(settings: BareSettings) -> Application:
    model = BareModel.options(num_replicas=settings.num_replicas,
                              ray_actor_options=settings.model_actor_options
                              or MODEL_OPTIONS).bind(settings)
    pre = BarePreprocess.bind(settings, model)
    return BareIngress.bind(pre, settings.expected_accuracy)


BARE_NAME = "bare"


def deploy_bare(base_url: str, settings: BareSettings) -> float:
    """Deploy the bare graph under /<BARE_NAME> and wait for its /healthz; seconds taken."""
    from bench.core import serve as local_serve

    return local_serve.deploy(build_bare_app(settings), BARE_NAME, "/" + BARE_NAME,
                              f"{base_url}/{BARE_NAME}/healthz")


def delete_bare() -> None:
    from bench.core import serve as local_serve

    local_serve.delete(BARE_NAME)
