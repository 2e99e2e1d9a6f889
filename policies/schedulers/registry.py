"""The scheduler registry: name -> factory, params class and the plan file it reads.

This is the one place that says which plan kind each scheduler runs: deployments read the
plan file of `plan_kind(name)`, profiling builds it, and configs check names against
`servable_names()` / `plan_free_names()`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from policies.profile import Profile
from policies.schedulers.base import Scheduler
from policies.schedulers.fixed import FixedScheduler
from policies.schedulers.mosel import make_mosel
from policies.schedulers.otas import make_otas
from policies.schedulers.params import (
    AllModalitiesParams,
    ExtremeParams,
    FixedGammaParams,
    FixedParams,
    JellyfishParams,
    ModelSwitchingParams,
    MoselParams,
    OtasParams,
    RamsisParams,
    SchedulerParams,
    make_params,
)
from policies.schedulers.plan_types import Plan, PlanKind
from policies.schedulers.ramsis import make_jellyfish, make_model_switching, make_ramsis


@dataclass(frozen=True)
class SchedulerEntry:
    """`factory(profile, plan or None, params)`; `plan_kind`: the plan file a deployment reads
    for it (None: it runs without one); `servable`: a deployment can run it (ModelSwitching's
    plan comes from the simulator's calibration, never from a plan file); `degrades`: under
    load it trades accuracy for time (a cheaper variant, fewer tokens, fewer modalities), so
    its answers spend the SLO's slack on purpose (the front door judges them by it:
    policies/admission.py)."""

    factory: Callable[[Profile, Plan | None, Any], Scheduler]
    params_type: type[SchedulerParams]
    plan_kind: PlanKind | None
    degrades: bool
    servable: bool = True


def _fixed(profile: Profile, plan: Plan | None, params: FixedParams | ExtremeParams) -> Scheduler:
    if plan is not None:
        raise ValueError(f"scheduler {params.scheduler!r} runs no plan (got {plan.KIND})")
    return FixedScheduler(profile, params)


_REGISTRY: dict[str, SchedulerEntry] = {
    "fixed": SchedulerEntry(_fixed, FixedParams, None, degrades=False),
    "fastest": SchedulerEntry(_fixed, ExtremeParams, None, degrades=False),
    "most_accurate": SchedulerEntry(_fixed, ExtremeParams, None, degrades=False),
    "ramsis": SchedulerEntry(make_ramsis, RamsisParams, PlanKind.RAMSIS, degrades=True),
    "jellyfish": SchedulerEntry(make_jellyfish, JellyfishParams, PlanKind.JELLYFISH,
                                degrades=True),
    "modelswitching": SchedulerEntry(make_model_switching, ModelSwitchingParams, None,
                                     degrades=True, servable=False),
    "otas": SchedulerEntry(make_otas, OtasParams, PlanKind.OTAS, degrades=True),
    "fixed_gamma": SchedulerEntry(make_otas, FixedGammaParams, PlanKind.OTAS, degrades=False),
    "mosel": SchedulerEntry(make_mosel, MoselParams, PlanKind.MOSEL, degrades=True),
    "all_modalities": SchedulerEntry(make_mosel, AllModalitiesParams, PlanKind.MOSEL,
                                     degrades=False),
}


def scheduler_names() -> list[str]:
    return sorted(_REGISTRY)


def servable_names() -> list[str]:
    """Schedulers a deployment config may name as its `policy`."""
    return sorted(n for n, e in _REGISTRY.items() if e.servable)


def plan_free_names() -> list[str]:
    """Schedulers that need no plan: what a deployment may fall back to."""
    return sorted(n for n, e in _REGISTRY.items() if e.servable and e.plan_kind is None)


def entry(name: str) -> SchedulerEntry:
    found = _REGISTRY.get(name)
    if found is None:
        raise ValueError(f"unknown scheduler {name!r}; valid: {scheduler_names()}")
    return found


def degrades(name: str) -> bool:
    """Whether scheduler `name` trades accuracy for time under load (SchedulerEntry.degrades)."""
    return entry(name).degrades


def plan_kind(name: str) -> PlanKind | None:
    """The plan file scheduler `name` reads (None: it needs none)."""
    return entry(name).plan_kind


def make_scheduler(name: str, profile: Profile, plan: Plan | None = None,
                   params: SchedulerParams | Mapping[str, Any] | None = None) -> Scheduler:
    """A scheduler for one replica. `plan`: the plan it runs (None: plan-free, or built now
    where the scheduler can; else `MissingPlan`); `params`: its params (a mapping is checked by
    `make_params`; see docs/schedulers.md). Unknown names raise ValueError listing the valid
    ones; params of another scheduler, or a plan of a kind it does not run, too."""
    e = entry(name)
    typed = params if isinstance(params, e.params_type) else None
    if typed is None:
        if params is not None and not isinstance(params, Mapping):
            raise ValueError(f"scheduler {name!r} takes {e.params_type.__name__}, "
                             f"got {type(params).__name__}")
        typed = make_params(name, params)
    if typed.scheduler != name:
        raise ValueError(f"params for {typed.scheduler!r} given to scheduler {name!r}")
    return e.factory(profile, plan, typed)
