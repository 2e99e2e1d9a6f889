"""`AppConfig`: the serving application's configuration, validated from serve_config.yaml args.

Validated once in `app.builder.build_app` and never mutated; the deployments receive it (or the
part they need) as plain constructor arguments. Unknown keys are errors (`extra="forbid"`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Device = Literal["auto", "cpu", "cuda"]
Percentile = Literal["mean", "p50", "p95", "p99"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HttpConfig(_Strict):
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


class PathsConfig(_Strict):
    models_dir: Path = Field(default=Path(".cache/models"), description="trained weights cache")
    profiles_dir: Path = Field(default=Path(".cache/profiles"),
                               description="profile JSON files `<model>.<task>.json`")
    plans_dir: Path = Field(default=Path(".cache/plans"),
                            description="plan JSON files `<model>.<task>.<kind>.json`")

    def resolved(self, root: Path) -> PathsConfig:
        """Relative paths made absolute against `root` (replicas may run in another cwd)."""
        def fix(p: Path) -> Path:
            return p if p.is_absolute() else (root / p).resolve()
        return PathsConfig(models_dir=fix(self.models_dir), profiles_dir=fix(self.profiles_dir),
                           plans_dir=fix(self.plans_dir))


class ControllerConfig(_Strict):
    interval_s: float = Field(default=1.0, gt=0,
                              description="how often replicas report stats and fetch plans")
    window_s: float = Field(default=5.0, gt=0,
                            description="arrival-rate window of the load estimate")
    stale_after_s: float = Field(default=5.0, gt=0,
                                 description="a replica silent this long no longer counts in load")


class PlanConfig(_Strict):
    """How the classifier's plan (RAMSIS policy set) is computed; the defaults are the paper's
    model. Changing any field rebuilds the plan at the next start (plans are cached by it)."""

    max_qps: float | None = Field(
        default=None, gt=0,
        description="highest deployment load (items/s) planned for; default: the capacity of "
                    "the fastest variant at the max batch size, often far beyond what the "
                    "serving stack can carry (more tables, longer builds)")
    max_queue: int | None = Field(
        default=None, gt=0, le=128,
        description="RAMSIS queue bound N; default: max_batch_size (a batch may take the whole "
                    "queue). Larger: batches stay capped at max_batch_size while the policy sees "
                    "queues up to N, as jobs of many items create")
    job_size: int = Field(
        default=1, gt=0, le=128,
        description="items per call the RAMSIS policy expects: calls of J items sharing one "
                    "deadline arrive as Poisson calls at load / J (1: single requests)")
    reward: Literal["per_decision", "per_query"] = Field(
        default="per_decision",
        description="RAMSIS objective: accuracy per batch decision (the reference's) or per query "
                    "(what clients see; about 2x the solve time)")


class ClassifierConfig(_Strict):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_\-]+$",
                      description="model family name in deployments.models.registry; also the "
                                  "`model` field of requests and the Serve deployment suffix")
    policy: str = Field(default="most_accurate",
                        description="scheduler name in policies.schedulers.registry")
    fallback_policy: str = Field(
        default="most_accurate",
        description="scheduler used when `policy` is unknown or its plan is missing")
    policy_params: dict[str, Any] = Field(default_factory=dict,
                                          description="knobs passed to the scheduler")
    default_slo_ms: float = Field(default=200.0, gt=0,
                                  description="SLO the plans are computed for")
    percentile: Percentile = Field(
        default="p95", description="latency percentile used for planning and the slo_unachievable check")
    max_batch_size: int = Field(default=8, gt=0, le=256, description="largest batch a replica runs")
    max_queued_items: int = Field(default=256, gt=0,
                                  description="queue bound per replica; beyond it items are shed")
    latency_feedback: bool = Field(
        default=True, description="policies see slack and load scaled by the measured slowdown "
        "of live batches against the profile (policies/schedulers/slowdown.py)")
    num_replicas: int = Field(default=1, gt=0, description="Serve replicas of this classifier")
    ray_actor_options: dict[str, Any] = Field(
        default_factory=lambda: {"num_cpus": 0.5},
        description="Ray actor options (fractional num_cpus; num_gpus on GPU clusters)")
    health_check_period_s: float = Field(
        default=2.0, gt=0, description="how often Serve checks a replica (a dead one is replaced)")
    device: Device = Field(default="auto", description="auto: CUDA when the replica sees a GPU")
    tasks: list[str] | None = Field(default=None,
                                    description="tasks to serve (default: all of the family)")
    plan: PlanConfig = Field(default_factory=PlanConfig, description="plan computation knobs")

    def scheduler_params(self) -> dict[str, Any]:
        """Params handed to `make_scheduler`: the config's batch cap and percentile unless the
        policy params set them explicitly."""
        return {"max_batch_size": self.max_batch_size, "percentile": self.percentile,
                "slo_s": self.default_slo_ms / 1000.0, "num_workers": self.num_replicas,
                **self.policy_params}


class AppConfig(_Strict):
    http: HttpConfig = Field(default_factory=HttpConfig, description="HTTP ingress settings")
    paths: PathsConfig = Field(default_factory=PathsConfig, description="artifact directories")
    controller: ControllerConfig = Field(default_factory=ControllerConfig,
                                         description="control plane settings")
    classifiers: list[ClassifierConfig] = Field(min_length=1,
                                                description="one Serve deployment per family")
    ensure_artifacts: bool = Field(
        default=True, description="train and profile missing models when the app is built")

    @model_validator(mode="after")
    def _unique_names(self) -> AppConfig:
        names = [c.name for c in self.classifiers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"classifier names must be unique; repeated: {dupes}")
        return self

    @model_validator(mode="after")
    def _timeouts(self) -> AppConfig:
        if self.controller.stale_after_s < self.controller.interval_s:
            raise ValueError("controller.stale_after_s must be >= controller.interval_s")
        return self

    def classifier(self, name: str) -> ClassifierConfig:
        for c in self.classifiers:
            if c.name == name:
                return c
        raise ValueError(f"unknown classifier {name!r}; valid: {[c.name for c in self.classifiers]}")
