"""Config pieces shared by the deployments: the strict base model, artifact paths and the
control-plane link (validated once in `app.builder`, never mutated; unknown keys are errors)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Device = Literal["auto", "cpu", "cuda"]
Percentile = Literal["mean", "p50", "p95", "p99"]


class StrictConfig(BaseModel):
    """Frozen, and unknown keys are errors (`extra="forbid"`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PathsConfig(StrictConfig):
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


class ControllerConfig(StrictConfig):
    interval_s: float = Field(default=1.0, gt=0,
                              description="how often replicas report stats and fetch plans")
    window_s: float = Field(default=5.0, gt=0,
                            description="arrival-rate window of the load estimate")
    stale_after_s: float = Field(default=5.0, gt=0,
                                 description="a replica silent this long no longer counts in load")
