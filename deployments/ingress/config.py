"""`HttpConfig`: the HTTP ingress's settings (part of `app.config.AppConfig`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from deployments.config import StrictConfig


class HttpConfig(StrictConfig):
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024, gt=0,
        description="largest accepted request body; larger bodies get 413 payload_too_large")
    request_timeout_s: float = Field(
        default=30.0, gt=0,
        description="upper bound on how long the ingress waits for any downstream call")
    deadline_grace_s: float = Field(
        default=2.0, ge=0,
        description="how long past an item's deadline the ingress still waits for the replica's "
                    "own answer (a batch may finish late) before answering deadline_exceeded")
    response_margin_ms: float = Field(
        default=0.0, ge=0,
        description="time reserved for the answer's way back (proxy, HTTP): the replicas get "
                    "deadline = arrival + SLO - margin (at most half the SLO is reserved)")
    max_ongoing_requests: int = Field(
        default=1000, gt=0, description="concurrent requests per ingress/preprocess replica")
    num_replicas: int = Field(default=1, gt=0, description="ingress replicas")
    preprocess_replicas: int = Field(default=1, gt=0, description="preprocess replicas")
    ray_actor_options: dict[str, Any] = Field(
        default_factory=lambda: {"num_cpus": 0.1},
        description="Ray actor options of the ingress, preprocess and controller replicas")
