"""Config pieces shared by the deployments: the strict base model and the control-plane link (validated once in `app.builder`, never mutated; unknown keys are errors)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Device = Literal["auto", "cpu", "cuda"]
Percentile = Literal["mean", "p50", "p95", "p99"]


class StrictConfig(BaseModel):
    """Frozen, and unknown keys are errors (`extra="forbid"`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ControllerConfig(StrictConfig):
    interval_s: float = Field(default=1.0, gt=0,
                              description="how often replicas report stats and fetch plans")
    window_s: float = Field(default=5.0, gt=0,
                            description="arrival-rate window of the load estimate")
    stale_after_s: float = Field(default=5.0, gt=0,
                                 description="a replica silent this long no longer counts in load")


GRPC_MESSAGE_ENV = "RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH"
GRPC_MESSAGE_BYTES = 64 * 1024 * 1024
RAY_GRPC_MESSAGE_BYTES = 4 * 1024 * 1024  # Ray Serve's default when the env does not say


def grpc_message_bytes(env: dict[str, str]) -> int:
    """The gRPC receive limit of calls between replicas under `env` (Ray's default if unset)."""
    return int(env.get(GRPC_MESSAGE_ENV, RAY_GRPC_MESSAGE_BYTES))


THROUGHPUT_ENV = {
    # Serve runs user code and the handle router on the replica's own event loop instead of
    # a thread each: no cross-thread hand-off per call (~10% less CPU per request, docs/front.md)
    "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
    "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
    # calls between replicas travel over gRPC, whose receive limit is 4 MiB by default: a
    # job's items (up to http.max_body_bytes of base64) travel in one call (app/config.py
    # checks the body limit fits; the ingress's coalescer keeps merged calls under half of it)
    GRPC_MESSAGE_ENV: str(GRPC_MESSAGE_BYTES),
}


class RequestPathConfig(StrictConfig):
    """How a request travels from the ingress to the model (docs/serving.md, "Request path")."""

    decode_at: Literal["classifier", "preprocess"] = Field(
        default="classifier",
        description="where wire inputs are decoded: in the family's classifier replicas (one "
                    "hop less per call) or in preprocess replicas of their own (decode scales "
                    "apart from the model; pays off for large inputs)")
    handle_transport: Literal["grpc", "object_store"] = Field(
        default="grpc",
        description="how calls between deployments travel: Serve's inter-deployment gRPC or "
                    "Ray actor calls through the object store")
    coalesce_max_calls: int = Field(
        default=32, ge=1,
        description="requests to one family that arrive in the same event-loop turn of the "
                    "ingress travel as one handle call, up to this many (1: every request "
                    "alone); no request waits for others")
    replica_env: dict[str, str] = Field(
        default_factory=lambda: dict(THROUGHPUT_ENV),
        description="environment of every replica of the app (merged into its runtime_env); "
                    "the default runs Serve's user code and router on the replica's event loop")

# The same for the whole Ray cluster (its Serve proxies too), plus the proxy's calls to the
# ingress over gRPC and the proxy's admission middleware: set where Ray starts (scripts/serve.sh, the benches, the tests, the
# RayService manifest's containers); tests/unit/test_deploy_configs.py checks they agree.
PROXY_CALLBACK_ENV = "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"
CLUSTER_ENV = {
    "RAY_SERVE_PROXY_USE_GRPC": "1",
    # admission in the proxy itself (a refusal costs nothing downstream)
    PROXY_CALLBACK_ENV: "deployments.ingress.proxy.front_door:proxy_middlewares",
    **THROUGHPUT_ENV,
}
