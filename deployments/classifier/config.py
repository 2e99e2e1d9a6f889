"""`ClassifierConfig`: one classifier deployment (a model family) and how its plan is computed."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from deployments.config import Device, Percentile, StrictConfig


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
