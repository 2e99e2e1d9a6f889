"""`make_scheduler`: build a replica scheduler by name (the deployment config names it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policies.profile import Profile
from policies.schedulers.base import Scheduler
from policies.schedulers.common import latency_model
from policies.schedulers.fixed import FixedScheduler
from policies.schedulers.mosel import make_all_modalities, make_mosel
from policies.schedulers.otas import make_fixed_gamma, make_otas
from policies.schedulers.ramsis import make_jellyfish, make_model_switching, make_ramsis

Factory = Callable[[Profile, dict[str, Any] | None, dict[str, Any]], Scheduler]


def _fixed(profile: Profile, plan: dict[str, Any] | None, params: dict[str, Any]) -> Scheduler:
    return FixedScheduler(profile, params, name="fixed")


def _fastest(profile: Profile, plan: dict[str, Any] | None, params: dict[str, Any]) -> Scheduler:
    model = latency_model(profile, params)
    return FixedScheduler(profile, {**params, "variant": model.names[model.fastest()]},
                          name="fastest")


def _most_accurate(profile: Profile, plan: dict[str, Any] | None,
                   params: dict[str, Any]) -> Scheduler:
    model = latency_model(profile, params)
    return FixedScheduler(profile, {**params, "variant": model.names[model.most_accurate()]},
                          name="most_accurate")


_FACTORIES: dict[str, Factory] = {
    "fixed": _fixed,
    "fastest": _fastest,
    "most_accurate": _most_accurate,
    "ramsis": make_ramsis,
    "jellyfish": make_jellyfish,
    "modelswitching": make_model_switching,
    "otas": make_otas,
    "fixed_gamma": make_fixed_gamma,
    "mosel": make_mosel,
    "all_modalities": make_all_modalities,
}


def scheduler_names() -> list[str]:
    return sorted(_FACTORIES)


def make_scheduler(name: str, profile: Profile, plan: dict[str, Any] | None = None,
                   params: dict[str, Any] | None = None) -> Scheduler:
    """A scheduler for one replica. `plan` is the JSON plan the policy needs (None for the
    plan-free ones); `params` are the scheduler's knobs (see docs/schedulers.md).
    Unknown names raise ValueError listing the valid ones."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown scheduler {name!r}; valid: {scheduler_names()}")
    return factory(profile, plan, dict(params or {}))
