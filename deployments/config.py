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
