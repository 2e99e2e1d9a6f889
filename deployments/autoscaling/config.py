"""`autoscaling:` of a stage (generation.encoder / generation.llm) or of a classifier: the
token-throughput policy's settings (policies/autoscaling/stage.py) and Serve's metric plumbing.
Unknown keys are errors; without `autoscaling:` the deployment runs `num_replicas` fixed.

Serve 2.60 (verified in its source): replicas push their `record_autoscaling_stats()` every
`metrics_interval_s` of the AutoscalingConfig (the env var
RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S is defined but not read there) and record a
point every min(look_back_period_s x 0.2, metrics_interval_s); the controller averages each
replica's points over `look_back_period_s` (time-weighted) and runs the policy every 0.1 s.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from deployments.config import StrictConfig


class AutoscalingSettings(StrictConfig):
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(4, ge=1)
    initial_replicas: int | None = Field(
        None, ge=0, description="at deploy; none: from history where the app has one, else "
                                "the stage's num_replicas within [min, max]")
    capacity_per_s: float | None = Field(
        None, gt=0, description="what one replica carries within the SLO (tokens/s for the "
                                "stages, items/s for classifiers); none: from the profile")
    target_utilization: float = Field(0.8, gt=0, le=1,
                                      description="replicas = ceil(load / (capacity x this))")
    scale_down_delay_s: float = Field(30.0, ge=0,
                                      description="fewer replicas only after this long low")
    startup_s: float = Field(
        5.0, ge=0, description="decision -> serving (docs/autoscaling.md); the load is forecast "
                               "this far ahead, no scale-down this soon after a scale-up")
    trend_window_s: float = Field(10.0, gt=0, description="smoothing of the load's slope")
    slo_attainment_floor: float = Field(
        0.99, ge=0, le=1, description="replicas reporting less add one (at most once per "
                                      "startup_s); 0: off")
    look_back_period_s: float = Field(5.0, gt=0,
                                      description="Serve averages each replica's reports over it")
    metrics_interval_s: float = Field(1.0, gt=0, description="how often replicas push reports")
    rate_window_s: float = Field(5.0, gt=0,
                                 description="the replicas' arrival-rate window (meter.py)")

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingSettings:
        if self.min_replicas > self.max_replicas:
            raise ValueError(f"min_replicas ({self.min_replicas}) > max_replicas "
                             f"({self.max_replicas})")
        i = self.initial_replicas
        if i is not None and not self.min_replicas <= i <= self.max_replicas:
            raise ValueError(f"initial_replicas ({i}) must be within [min_replicas, "
                             f"max_replicas] = [{self.min_replicas}, {self.max_replicas}]")
        if self.look_back_period_s <= self.metrics_interval_s:
            raise ValueError(f"look_back_period_s ({self.look_back_period_s}) must exceed "
                             f"metrics_interval_s ({self.metrics_interval_s})")
        return self

    def policy_kwargs(self) -> dict[str, Any]:
        """The policy's settings (JSON, as Serve's policy_kwargs must be); bounds come from the
        AutoscalingConfig (Serve adjusts them for target capacity)."""
        return {"target_utilization": self.target_utilization,
                "scale_down_delay_s": self.scale_down_delay_s, "startup_s": self.startup_s,
                "trend_window_s": self.trend_window_s,
                "slo_attainment_floor": self.slo_attainment_floor}


class EncoderAutoscaling(AutoscalingSettings):
    slo_ms: float | None = Field(
        None, gt=0, description="the latency SLO the capacity is read at (EncoderProfile."
                                "capacity_tokens_per_s); none: limits.default_ttft_slo_ms")
    latency_share: float = Field(0.5, gt=0, le=1,
                                 description="share of the SLO one batch may take")


class LLMAutoscaling(AutoscalingSettings):
    startup_s: float = Field(45.0, ge=0, description="an LLM replica loads its engine")
    ttft_slo_ms: float | None = Field(None, gt=0,
                                      description="none: limits.default_ttft_slo_ms")
    tbt_slo_ms: float = Field(100.0, gt=0, description="time between tokens SLO")
    decode_tokens_per_prompt_token: float = Field(
        0.0, ge=0, description="output tokens each prompt token brings (their decode cost "
                               "counts in the capacity)")
    latency_share: float = Field(0.5, gt=0, le=1)


class ClassifierAutoscaling(AutoscalingSettings):
    variant: str = Field(
        "most_accurate", pattern=r"^(most_accurate|fastest)$",
        description="whose latency profile the capacity is read from: the most accurate "
                    "variant (scale to keep accuracy) or the fastest (scale only past what "
                    "degrading can absorb)")
    latency_share: float = Field(0.5, gt=0, le=1)
