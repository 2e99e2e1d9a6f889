"""The answers of the GET routes as the OpenAPI declares them (openapi.py): the handlers build
plain dicts (classify/catalog.py `to_json`, health.py `FamilyLiveness.to_json`, the controller's
`status`); these models say what a client may rely on, and the fuzzer (scripts/fuzz.sh) checks
every answer against them. Extra keys are allowed (an answer may grow)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class VariantOut(BaseModel):
    name: str
    model: str
    modalities: list[str]
    gamma: int
    accuracy: float
    latency_ms: float = Field(description="batch of one, at the family's planning percentile")
    latency_ms_by_batch: dict[str, float] = Field(description="batch size -> ms")


class TaskOut(BaseModel):
    task: str
    fastest_latency_ms: float = Field(description="the least SLO this task accepts")
    variants: list[VariantOut]


class FamilyOut(BaseModel):
    name: str
    modalities: list[str]
    default_task: str
    policy: str
    degrades: bool = Field(description="under load its policy trades accuracy for time "
                                       "(a cheaper variant, fewer tokens or modalities)")
    latency_percentile: str
    tasks: list[TaskOut]


class ModelsResponse(BaseModel):
    """GET /v1/models"""

    models: list[FamilyOut]
    object: Literal["list"] = "list"
    data: list[dict[str, Any]] = Field(
        default_factory=list, description="OpenAI's list shape: every model (families and the "
                                          "chat model) with `id`, `object`, `owned_by`")


class FamilyHealthOut(BaseModel):
    state: Literal["starting", "up", "suspect", "down"]
    healthy: bool
    live_replicas: int | None = Field(description="replicas the last probe reached; null: "
                                                  "no conclusive probe yet")
    for_s: float = Field(description="seconds in this state")
    reason: str


class HealthResponse(BaseModel):
    """GET /healthz (200: some family can serve; docs/serving.md, Health)"""

    status: Literal["ok", "degraded"]
    models: list[str]
    down: list[str] = Field(default_factory=list, description="families with no live replica")
    families: dict[str, FamilyHealthOut] = Field(default_factory=dict)


class DeploymentHealthOut(BaseModel):
    state: Literal["starting", "up", "suspect", "down"]
    for_s: float
    reason: str


class DeploymentStatusOut(BaseModel):
    policy: str
    load_qps: float
    queue_len: int
    replicas: list[dict[str, Any]]
    fallback: dict[str, Any] = Field(description="task -> why it runs its fallback policy")
    counters: dict[str, float]
    answered: int
    slo_attainment: float | None
    mean_expected_accuracy: float | None
    variants: dict[str, int]
    selected_plans: dict[str, Any]
    healthy: bool | None = Field(default=None, description="the ingress's view (Health)")
    live_replicas: int | None = None
    health: DeploymentHealthOut | None = None


class StatusResponse(BaseModel):
    """GET /v1/status (the controller's, each family marked by the ingress)"""

    time_s: float
    uptime_s: float
    deployments: dict[str, DeploymentStatusOut]
