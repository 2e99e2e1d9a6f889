"""Each scheduler's knobs as one frozen dataclass (the `policy_params` of a deployment config).

A params class names the scheduler(s) it belongs to in its `scheduler` field, so a config can
hold them as a union told apart by that tag. `__pydantic_config__` makes a config that embeds
them (deployments/classifier/config.py) reject unknown keys; pydantic is never imported here.
`None` for `percentile` / `max_batch_size` means "the plan's, else p95 / the largest profiled
batch size"; the deployment fills them from its own settings (`ClassifierConfig`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_type_hints

from policies.modality.api import ABLATION_NAMES, POLICY_NAMES
from policies.tokens.api import ALLOCATORS

Percentile = Literal["mean", "p50", "p95", "p99"]
LoadScope = Literal["replica", "deployment"]
_FORBID = {"extra": "forbid"}


def _positive(owner: object, *names: str) -> None:
    for name in names:
        value = getattr(owner, name)
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be > 0, got {value}")


def _one_of(name: str, value: object, valid: tuple[object, ...]) -> None:
    if value not in valid:
        raise ValueError(f"{name} {value!r}; valid: {[v for v in valid if v is not None]}")


@dataclass(frozen=True)
class CommonParams:
    """The latency model every scheduler plans with."""

    percentile: Percentile | None = None
    max_batch_size: int | None = None

    def __post_init__(self) -> None:
        _positive(self, "max_batch_size")
        _one_of("percentile", self.percentile, (None, *get_args(Percentile)))


@dataclass(frozen=True)
class FixedParams(CommonParams):
    """`fixed`: one named variant (default: the most accurate)."""

    scheduler: Literal["fixed"] = "fixed"
    variant: str | None = None
    __pydantic_config__ = _FORBID


@dataclass(frozen=True)
class ExtremeParams(CommonParams):
    """`fastest` / `most_accurate`: `fixed` on the variant the name says."""

    scheduler: Literal["fastest", "most_accurate"] = "most_accurate"
    __pydantic_config__ = _FORBID


@dataclass(frozen=True)
class LoadTableParams(CommonParams):
    """Shared by RAMSIS and its load-granular baselines (see ramsis.py for the load scope)."""

    load_scope: LoadScope = "replica"
    drop_infeasible: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _one_of("load_scope", self.load_scope, get_args(LoadScope))


@dataclass(frozen=True)
class BuildNowParams:
    """Build the plan inside the scheduler when none is given (expensive for RAMSIS)."""

    slo_s: float | None = None
    num_workers: int | None = None  # None: 1
    min_qps: float = 1.0
    max_qps: float | None = None

    def check_build(self) -> None:
        _positive(self, "slo_s", "num_workers", "min_qps", "max_qps")


@dataclass(frozen=True)
class RamsisParams(LoadTableParams, BuildNowParams):
    scheduler: Literal["ramsis"] = "ramsis"
    intervals: int = 100  # slack grid of a plan built now
    __pydantic_config__ = _FORBID

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_build()
        _positive(self, "intervals")


@dataclass(frozen=True)
class JellyfishParams(LoadTableParams, BuildNowParams):
    scheduler: Literal["jellyfish"] = "jellyfish"
    num_loads: int = 20  # anticipated loads of a plan built now
    __pydantic_config__ = _FORBID

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_build()
        if self.num_loads < 2:
            raise ValueError(f"num_loads must be >= 2, got {self.num_loads}")


@dataclass(frozen=True)
class ModelSwitchingParams(LoadTableParams):
    scheduler: Literal["modelswitching"] = "modelswitching"
    __pydantic_config__ = _FORBID


@dataclass(frozen=True)
class OtasParams(CommonParams):
    """`allocator` / `kappa`: None keeps the plan's."""

    scheduler: Literal["otas"] = "otas"
    allocator: str | None = None
    kappa: float | None = None
    __pydantic_config__ = _FORBID

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.allocator is not None and self.allocator not in ALLOCATORS:
            raise ValueError(f"unknown allocator {self.allocator!r}; valid: {sorted(ALLOCATORS)}")
        if self.kappa is not None and not 0.0 <= self.kappa <= 1.0:
            raise ValueError(f"kappa must be in [0, 1], got {self.kappa}")


@dataclass(frozen=True)
class FixedGammaParams(CommonParams):
    """`gamma`: None is 0 when profiled, else the largest profiled gamma."""

    scheduler: Literal["fixed_gamma"] = "fixed_gamma"
    gamma: int | None = None
    __pydantic_config__ = _FORBID


@dataclass(frozen=True)
class MatrixParams(CommonParams):
    """A MOSEL matrix built now (no plan): its job sizes and accuracy levels; `percentile` is
    only the one it is built with (default mean)."""

    max_job_size: int = 64
    num_levels: int = 20

    def __post_init__(self) -> None:
        super().__post_init__()
        _positive(self, "max_job_size", "num_levels")


@dataclass(frozen=True)
class MoselParams(MatrixParams):
    """`policy`: MOSEL's online policy; `seed` for the random one."""

    scheduler: Literal["mosel"] = "mosel"
    policy: str = "optimized"
    seed: int = 0
    __pydantic_config__ = _FORBID

    def __post_init__(self) -> None:
        super().__post_init__()
        valid = [*POLICY_NAMES, *ABLATION_NAMES]
        if self.policy not in valid:
            raise ValueError(f"unknown MOSEL policy {self.policy!r}; valid: {valid}")


@dataclass(frozen=True)
class AllModalitiesParams(MatrixParams):
    scheduler: Literal["all_modalities"] = "all_modalities"
    __pydantic_config__ = _FORBID


SchedulerParams = (FixedParams | ExtremeParams | RamsisParams | JellyfishParams
                   | ModelSwitchingParams | OtasParams | FixedGammaParams | MoselParams
                   | AllModalitiesParams)
PARAMS_TYPES: tuple[type[SchedulerParams], ...] = (
    FixedParams, ExtremeParams, RamsisParams, JellyfishParams, ModelSwitchingParams, OtasParams,
    FixedGammaParams, MoselParams, AllModalitiesParams)


def params_type(scheduler: str) -> type[SchedulerParams]:
    """The params class whose `scheduler` tag admits `scheduler`."""
    for cls in PARAMS_TYPES:
        if scheduler in _tags(cls):
            return cls
    valid = sorted(t for cls in PARAMS_TYPES for t in _tags(cls))
    raise ValueError(f"unknown scheduler {scheduler!r}; valid: {valid}")


def _tags(cls: type[SchedulerParams]) -> tuple[str, ...]:
    return tuple(get_args(get_type_hints(cls)["scheduler"]))


def make_params(scheduler: str, values: Mapping[str, Any] | None = None) -> SchedulerParams:
    """`scheduler`'s params from plain values; an unknown key is a ValueError naming it and the
    valid ones (configs get the same check from pydantic)."""
    cls = params_type(scheduler)
    values = dict(values or {})
    known = {f.name for f in dataclasses.fields(cls)} - {"scheduler"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown params {unknown} for scheduler {scheduler!r}; "
                         f"valid: {sorted(known)}")
    return cls(**{**values, "scheduler": scheduler})
