"""`HttpConfig`: the HTTP ingress's settings (part of `app.config.AppConfig`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from deployments.config import StrictConfig


class HttpConfig(StrictConfig):
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024, gt=0,
        description="largest accepted request body; larger bodies get 413 payload_too_large "
                    "(refused while the body streams; the proxy applies ADAPTSERVE_EDGE's "
                    "max_body_bytes first: keep them equal, deployments/ingress/proxy/edge.py)")
    body_read_timeout_s: float = Field(
        default=20.0, gt=0,
        description="the whole body must arrive within this long after the headers, else 408 "
                    "body_timeout (the proxy applies ADAPTSERVE_EDGE's first)")
    max_json_depth: int = Field(
        default=32, ge=4,
        description="arrays/objects nested deeper in a body: 400 json_limit_exceeded")
    max_json_number_chars: int = Field(
        default=64, ge=20,
        description="a JSON number written with more characters: 400 json_limit_exceeded")
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
        default=256, gt=0,
        description="concurrent requests per ingress/preprocess replica; beyond it the Serve "
                    "proxy queues requests for the ingress (up to max_queued_requests)")
    max_queued_requests: int | None = Field(
        default=128, gt=0,
        description="requests the Serve proxy holds for the ingress when every ingress replica "
                    "is at max_ongoing_requests; beyond it the proxy refuses without running "
                    "the ingress (backpressure_status_code, Retry-After); null: no bound")
    backpressure_status_code: Literal[503, 429] = Field(
        default=503, description="HTTP status of the proxy's refusals (Serve allows 503 or 429)")
    backpressure_retry_after_s: float = Field(
        default=1.0, ge=1, description="Retry-After (seconds, rounded up) of the proxy's refusals")
    deadline_admission: bool = Field(
        default=True,
        description="refuse (429 overloaded) a request whose time already spent plus the "
                    "family's expected wait and fastest variant exceeds its deadline")
    max_items_per_job: int = Field(
        default=256, gt=0, description="items a /v1/jobs request may hold; more: 413 job_too_large")
    max_job_queue_share: float = Field(
        default=0.5, gt=0, le=1,
        description="share of a family's queue (max_queued_items x replicas) one job may hold; "
                    "its items beyond that, or beyond the free space, are shed at once")
    request_start_max_skew_s: float = Field(
        default=1.0, ge=0,
        description="an X-Request-Start this far in the future is still believed (clock skew "
                    "between the client or load balancer and this host); later ones are ignored")
    request_start_max_age_s: float = Field(
        default=60.0, gt=0, description="an X-Request-Start older than this is ignored")
    num_replicas: int = Field(default=1, gt=0, description="ingress replicas")
    preprocess_replicas: int = Field(default=1, gt=0, description="preprocess replicas")
    ray_actor_options: dict[str, Any] = Field(
        default_factory=lambda: {"num_cpus": 0.1},
        description="Ray actor options of the ingress, preprocess and controller replicas")

