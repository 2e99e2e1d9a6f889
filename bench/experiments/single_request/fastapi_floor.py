"""A one-process FastAPI + torch server of one variant of a family: the floor a user could write
by hand, against which the single-request benchmark (bench/experiments/single_request/run.py) measures the app.

One request is one decode and one forward of batch 1, no queue, no policy, no Ray. It answers
`POST /v1/classify` with the app's request and response shapes (so the load generator drives it
unchanged; the server's verdict `decision.deadline_met` is its own handler time against the SLO)
and `GET /healthz`. Handlers are plain `def`s (FastAPI runs them in its thread pool, as a user's
torch endpoint would run), one model call at a time under a lock, because a servable model is
safe from one thread at a time (deployments/models/base.py). Run in its own process:

    python -m bench.experiments.single_request.fastapi_floor --port 8200 --family family --variant family/cnn-xl
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from bench.core import serve as lb
from deployments.ingress.classify.schemas import (
    ClassifyRequest,
    ClassifyResponse,
    Decision,
    PredictionOut,
)


@dataclass(frozen=True)
class TorchServerSettings:
    port: int
    family: str
    variant: str
    models_dir: str
    task: str | None = None  # None: the family's first task
    expected_accuracy: float = 0.0  # reported in each decision, as the app does

    def argv(self) -> list[str]:
        """The command line that starts this server in a new process."""
        out = [sys.executable, "-m", "bench.experiments.single_request.fastapi_floor", "--port", str(self.port),
               "--family", self.family, "--variant", self.variant, "--models-dir",
               self.models_dir, "--expected-accuracy", str(self.expected_accuracy)]
        return out if self.task is None else [*out, "--task", self.task]


def create_app(settings: TorchServerSettings) -> FastAPI:
    import torch

    from deployments.models.registry import load_model

    torch.set_num_threads(1)  # as the app's replicas and the bare graph run theirs
    model = load_model(settings.family, cache_dir=Path(settings.models_dir), device="cpu")
    task = settings.task or model.tasks()[0]
    by_name = {v.name: v for v in model.variants()}
    if settings.variant not in by_name:
        raise ValueError(f"unknown variant {settings.variant!r}; valid: {sorted(by_name)}")
    variant, lock = by_name[settings.variant], threading.Lock()
    api = FastAPI(title="adaptserve-front-torch")

    @api.post("/v1/classify")
    def classify(req: ClassifyRequest) -> JSONResponse:
        start = time.perf_counter()
        with lock, torch.inference_mode():
            t_model = time.perf_counter()
            pred = model.run(variant, task, [model.decode(req.inputs, task)])[0]
            compute_ms = 1000.0 * (time.perf_counter() - t_model)
        latency_ms = 1000.0 * (time.perf_counter() - start)
        decision = Decision(variant=variant.name, model=variant.model or variant.name,
                            modalities=sorted(variant.modalities), gamma=variant.gamma,
                            expected_accuracy=settings.expected_accuracy, batch_size=1,
                            queue_ms=max(latency_ms - compute_ms, 0.0), compute_ms=compute_ms,
                            deadline_met=latency_ms <= req.slo.latency_ms, replica="front_torch")
        return JSONResponse(ClassifyResponse(
            request_id=uuid.uuid4().hex, status="ok", decision=decision, latency_ms=latency_ms,
            prediction=PredictionOut(label=pred.label, confidence=pred.confidence)).model_dump())

    @api.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return api


@contextmanager
def torch_server(settings: TorchServerSettings, timeout_s: float = 120.0) -> Iterator[str]:
    """The server running in a child process for the duration of the block; yields its URL.
    The child is stopped (terminate, then kill) on the way out, whatever happened."""
    proc = subprocess.Popen(settings.argv())
    url = f"http://127.0.0.1:{settings.port}"
    try:
        lb.wait_healthy(url + "/healthz", timeout_s)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    p = argparse.ArgumentParser(description="one-process FastAPI + torch classify server")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--family", required=True)
    p.add_argument("--variant", required=True)
    p.add_argument("--models-dir", required=True)
    p.add_argument("--task", default=None)
    p.add_argument("--expected-accuracy", type=float, default=0.0)
    a = p.parse_args(argv)
    settings = TorchServerSettings(a.port, a.family, a.variant, a.models_dir, a.task,
                                   a.expected_accuracy)
    uvicorn.run(create_app(settings), host="127.0.0.1", port=settings.port,
                log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
