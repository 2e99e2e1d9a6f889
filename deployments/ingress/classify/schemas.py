"""HTTP wire format of the classification API (pydantic v2; extra fields are rejected; a number
field takes a JSON number only, finite: `"100"` for `latency_ms` is a 422, not 100).

Every request gets exactly one JSON answer:
- 200 `ClassifyResponse` with status "ok" (a prediction and the decision behind it);
- 200 `ClassifyResponse` with status "deadline_exceeded" or "shed" and an `error` message, when
  the server chose not to (or could no longer) answer in time; the request is accounted, not lost;
- 4xx/5xx `ErrorResponse` for bad input or server faults (deployments/ingress/errors.py).
In a job (`JobResponse`) an item that failed inside the server has status "error" with
`error_type` (internal_error, replica_unavailable) and `error`; a single /v1/classify answers
such a failure with a 5xx `ErrorResponse` instead.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class SLOSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    latency_ms: float = Field(gt=0, strict=True,
                              description="end-to-end latency bound from arrival")
    min_accuracy: float | None = Field(default=None, ge=0, le=1, strict=True,
                                       description="accuracy floor (modality selection)")
    utility: float = Field(default=1.0, gt=0, strict=True,
                           description="utility of a correct, timely answer")


class ClassifyRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="deployment/model family name, see GET /v1/models")
    task: str | None = Field(default=None, description="task of the family; default its first")
    inputs: dict[str, Any] = Field(description="per-modality inputs, e.g. {'image': '<base64 PNG>'}")
    slo: SLOSpec


class JobRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str
    task: str | None = None
    items: list[dict[str, Any]] = Field(min_length=1, description="inputs of each item")
    slo: SLOSpec


class PredictionOut(BaseModel):
    label: int
    confidence: float
    label_name: str | None = Field(None, description="the label's name, where the model "
                                   "names its classes (a checkpoint's id2label, ...)")


class Decision(BaseModel):
    variant: str
    model: str
    modalities: list[str]
    gamma: int
    expected_accuracy: float
    batch_size: int
    queue_ms: float
    compute_ms: float
    deadline_met: bool
    replica: str
    dispatch_ms: float = 0.0  # from the server's arrival to the replica's queue (in queue_ms)


Status = Literal["ok", "deadline_exceeded", "shed", "error"]


class ClassifyResponse(BaseModel):
    request_id: str
    status: Status
    prediction: PredictionOut | None = None
    decision: Decision | None = None
    latency_ms: float
    error: str | None = None
    error_type: str | None = Field(default=None,
                                   description="for status 'error': internal_error or "
                                               "replica_unavailable")


class JobResponse(BaseModel):
    job_id: str
    results: list[ClassifyResponse]

