"""`ClassifierConfig`: one classifier deployment (a model family) and how its plan is computed."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from deployments.autoscaling.config import ClassifierAutoscaling
from deployments.config import Device, Percentile, StrictConfig
from deployments.models.sources import (
    BUILTIN_FAMILIES,
    BuiltinModel,
    CheckpointModel,
    DatasetConfig,
    ModelSource,
)
from policies.schedulers.params import SchedulerParams, make_params
from policies.schedulers.registry import plan_free_names, servable_names

DEFAULT_POLICY = "most_accurate"


class PlanConfig(StrictConfig):
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


class ClassifierConfig(StrictConfig):
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_\-]+$",
                      description="the family's name: the `model` field of requests and the "
                                  "Serve deployment suffix")
    model: ModelSource | None = Field(
        None, description="where the family's model comes from: {builtin: vit|fusion|family}, "
        "{checkpoints: [...]} or {import_path: 'pkg.module:factory'} (docs/own_models.md); "
        "default: the builtin family of this name")
    dataset: DatasetConfig | None = Field(
        None, description="labelled data accuracy per variant is measured on (required for "
                          "checkpoints; default for the others: the model's own examples)")
    threads: int = Field(default=1, gt=0, le=64,
                         description="torch threads of each replica (the latency profile is "
                                     "measured with as many)")
    policy: str = Field(default=DEFAULT_POLICY,
                        description="scheduler name in policies.schedulers.registry")
    fallback_policy: str = Field(
        default=DEFAULT_POLICY,
        description="plan-free scheduler a task runs while its policy's plan file is missing "
                    "(shown in the replica's report, /v1/status and adaptserve_policy_fallback)")
    policy_params: Annotated[SchedulerParams, Field(discriminator="scheduler")] = Field(
        default_factory=lambda: make_params(DEFAULT_POLICY),
        description="the scheduler's knobs (docs/schedulers.md), checked against its params "
                    "class: an unknown key is an error")
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
    autoscaling: ClassifierAutoscaling | None = Field(
        None, description="items/s autoscaling (docs/autoscaling.md); none: num_replicas fixed. "
                          "Plans are still solved for num_replicas workers")

    @model_validator(mode="before")
    @classmethod
    def _tag_params(cls, data: Any) -> Any:
        """`policy_params` are the params of `policy`: tag them with it, so they are checked
        against that scheduler's params class (the union's discriminator)."""
        if not isinstance(data, dict):
            return data
        policy = data.get("policy", DEFAULT_POLICY)
        params = data.get("policy_params", {})
        if isinstance(params, dict) and "scheduler" not in params and policy in servable_names():
            return {**data, "policy_params": {**params, "scheduler": policy}}
        return data

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value not in servable_names():
            raise ValueError(f"unknown policy {value!r}; valid: {servable_names()}")
        return value

    @field_validator("fallback_policy")
    @classmethod
    def _plan_free_fallback(cls, value: str) -> str:
        if value not in plan_free_names():
            raise ValueError(f"fallback_policy {value!r} must need no plan; valid: "
                             f"{plan_free_names()}")
        return value

    @model_validator(mode="after")
    def _checkpoints_need_data(self) -> ClassifierConfig:
        if isinstance(self.model, CheckpointModel) and self.dataset is None:
            raise ValueError(f"classifier {self.name!r}: checkpoints need a `dataset` (labelled "
                             "data their accuracy is measured on)")
        return self

    def source(self) -> ModelSource:
        """Where the model comes from: `model`, else the builtin family of this name (a
        ValueError naming the choices when there is none: the app's build stops on it)."""
        if self.model is not None:
            return self.model
        if self.name not in BUILTIN_FAMILIES:
            raise ValueError(
                f"classifier {self.name!r}: no `model`; give one of {{builtin: "
                f"{'|'.join(BUILTIN_FAMILIES)}}}, {{checkpoints: [...]}}, {{import_path: "
                f"'pkg.module:factory'}} (or name the classifier after a builtin family)")
        return BuiltinModel(builtin=self.name)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _params_match_policy(self) -> ClassifierConfig:
        if self.policy_params.scheduler != self.policy:
            raise ValueError(f"policy_params are for {self.policy_params.scheduler!r}, "
                             f"policy is {self.policy!r}")
        return self

    def scheduler_params(self) -> SchedulerParams:
        """The policy's params, with what they leave unset (None) taken from this config: batch
        cap, percentile, and for plans built now the SLO and the replica count."""
        return _filled(self.policy_params, max_batch_size=self.max_batch_size,
                       percentile=self.percentile, slo_s=self.default_slo_ms / 1000.0,
                       num_workers=self.num_replicas)

    def fallback_params(self) -> SchedulerParams:
        p = self.scheduler_params()
        return make_params(self.fallback_policy, {"max_batch_size": p.max_batch_size,
                                                  "percentile": p.percentile})


def _filled(params: SchedulerParams, **defaults: Any) -> SchedulerParams:
    names = {f.name for f in dataclasses.fields(params)}
    unset = {k: v for k, v in defaults.items() if k in names and getattr(params, k) is None}
    return dataclasses.replace(params, **unset)
