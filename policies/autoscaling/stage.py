"""Token-throughput autoscaling of one stage (ModServe section 4.2), pure arithmetic run by the
Serve hooks (deployments/autoscaling/) and by the simulator (app/sim/generation/).

replicas = ceil(load tokens/s / (capacity tokens/s at the SLO * target_utilization)), bounded by
[min_replicas, max_replicas], where capacity comes from the stage profile
(policies/generation/stage_profile.py) and load is what the stage's replicas report.

Where ModServe stops ("hysteresis prevention ... not covered"), `decide` goes on:
- scale up at once: a replica ordered now serves only `startup_s` later (an LLM replica loads its
  engine for tens of seconds), so the load is forecast `startup_s` ahead from its smoothed upward
  trend (a falling load is never extrapolated: scaling down waits anyway), at most
  `max_forecast_ratio` x the load now: a single step up (one large request in an idle window)
  looks like a steep ramp for a moment, and must not order several replicas on its own;
- scale down only after the desired count stayed below the current one for `scale_down_delay_s`,
  and then to the largest count desired during that window (a dip does not undo what the load
  needed a moment ago); never within `startup_s + scale_down_delay_s` of a scale-up (the new
  replica has not yet shown what it carries);
- SLO evidence (ModServe 4.3: the pool managers add instances when SLO attainment falls below
  0.99): attainment under `slo_attainment_floor` adds one replica beyond the token arithmetic,
  at most once per `startup_s` (the last one added must come up before more are asked for).
The state between calls is a frozen `ScalingState` the caller keeps (Serve: policy_state).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum


class Reason(StrEnum):
    STEADY = "steady"
    UP = "up"  # the token arithmetic (with the forecast) needs more replicas
    UP_SLO = "up_slo"  # SLO attainment under the floor
    DOWN = "down"
    HOLD_DELAY = "hold_scale_down_delay"  # fewer would do, not yet for long enough
    HOLD_STARTUP = "hold_after_scale_up"  # fewer would do, but a scale-up is too recent


@dataclass(frozen=True)
class ScalingSettings:
    capacity_tokens_per_s: float  # one replica, within the SLO (stage profile)
    min_replicas: int = 1
    max_replicas: int = 8
    target_utilization: float = 1.0
    scale_down_delay_s: float = 30.0
    startup_s: float = 0.0  # decision -> serving (docs/autoscaling.md)
    trend_window_s: float = 10.0  # smoothing of the load's slope
    slo_attainment_floor: float = 0.99
    max_forecast_ratio: float = 1.5  # the forecast is at most this x the load now

    def __post_init__(self) -> None:
        if not (self.capacity_tokens_per_s > 0 and math.isfinite(self.capacity_tokens_per_s)):
            raise ValueError(f"capacity_tokens_per_s must be finite and > 0, "
                             f"got {self.capacity_tokens_per_s}")
        if not 0 <= self.min_replicas <= self.max_replicas or self.max_replicas < 1:
            raise ValueError(f"need 0 <= min_replicas <= max_replicas, max_replicas >= 1; got "
                             f"{self.min_replicas}, {self.max_replicas}")
        if not 0 < self.target_utilization <= 1:
            raise ValueError(f"target_utilization must be in (0, 1], got "
                             f"{self.target_utilization}")
        if min(self.scale_down_delay_s, self.startup_s) < 0 or self.trend_window_s <= 0:
            raise ValueError("scale_down_delay_s, startup_s must be >= 0, trend_window_s > 0")
        if self.max_forecast_ratio < 1:
            raise ValueError(f"max_forecast_ratio must be >= 1, got {self.max_forecast_ratio}")
        if not 0 <= self.slo_attainment_floor <= 1:
            raise ValueError(f"slo_attainment_floor must be in [0, 1], got "
                             f"{self.slo_attainment_floor}")


@dataclass(frozen=True)
class ScalingState:
    """What `decide` remembers between calls; start from `ScalingState()`."""

    load_tokens_per_s: float | None = None  # the last call's load ...
    at_s: float | None = None  # ... and when
    trend_tokens_per_s2: float = 0.0  # smoothed slope of the load
    low_since_s: float | None = None  # desired < current since
    low_peak: int = 0  # the largest desired count since low_since_s
    last_up_s: float | None = None


@dataclass(frozen=True)
class ScalingDecision:
    replicas: int  # the new target
    desired: int  # what the token arithmetic alone asks for now (bounded)
    load_tokens_per_s: float
    forecast_tokens_per_s: float
    reason: Reason
    state: ScalingState


Emit = Callable[[int, Reason, ScalingState], ScalingDecision]


def replicas_for(load_tokens_per_s: float, settings: ScalingSettings) -> int:
    """ceil(load / (capacity * target_utilization)) within [min_replicas, max_replicas]."""
    per_replica = settings.capacity_tokens_per_s * settings.target_utilization
    need = math.ceil(max(0.0, load_tokens_per_s) / per_replica - 1e-9)
    return min(settings.max_replicas, max(settings.min_replicas, need))


def _trend(settings: ScalingSettings, state: ScalingState, load: float, now_s: float) -> float:
    if state.at_s is None or state.load_tokens_per_s is None or now_s <= state.at_s:
        return state.trend_tokens_per_s2
    dt = now_s - state.at_s
    slope = (load - state.load_tokens_per_s) / dt
    weight = min(1.0, dt / settings.trend_window_s)
    return state.trend_tokens_per_s2 + weight * (slope - state.trend_tokens_per_s2)


def _up_by_slo(settings: ScalingSettings, state: ScalingState, current: int,
               slo_attainment: float | None, now_s: float) -> bool:
    if slo_attainment is None or slo_attainment >= settings.slo_attainment_floor:
        return False
    if current >= settings.max_replicas:
        return False
    return state.last_up_s is None or now_s - state.last_up_s >= settings.startup_s


def decide(settings: ScalingSettings, current_replicas: int, load_tokens_per_s: float,
           now_s: float, state: ScalingState, slo_attainment: float | None = None
           ) -> ScalingDecision:
    """The stage's next target (module docstring). `current_replicas`: the current target
    (replicas still starting count: they were asked for already)."""
    load = max(0.0, load_tokens_per_s) if math.isfinite(load_tokens_per_s) else 0.0
    trend = _trend(settings, state, load, now_s)
    forecast = min(load + max(0.0, trend) * settings.startup_s,
                   load * settings.max_forecast_ratio)
    desired = replicas_for(forecast, settings)
    base = replace(state, load_tokens_per_s=load, at_s=now_s, trend_tokens_per_s2=trend)
    current = max(0, current_replicas)

    def out(replicas: int, reason: Reason, new: ScalingState) -> ScalingDecision:
        return ScalingDecision(replicas, desired, load, forecast, reason, new)

    in_bounds = min(settings.max_replicas, max(settings.min_replicas, current))
    if current > settings.max_replicas:  # the bounds changed: no hysteresis above the maximum
        return out(settings.max_replicas, Reason.DOWN, replace(base, low_since_s=None, low_peak=0))
    if desired > current or in_bounds > current:
        target = max(desired, in_bounds)
        return out(target, Reason.UP, replace(base, low_since_s=None, low_peak=0, last_up_s=now_s))
    if _up_by_slo(settings, state, current, slo_attainment, now_s):
        return out(current + 1, Reason.UP_SLO,
                   replace(base, low_since_s=None, low_peak=0, last_up_s=now_s))
    if desired == current and in_bounds == current:
        return out(current, Reason.STEADY, replace(base, low_since_s=None, low_peak=0))
    return _maybe_down(settings, base, current, max(desired, settings.min_replicas), now_s, out)


def _maybe_down(settings: ScalingSettings, base: ScalingState, current: int, desired: int,
                now_s: float, out: Emit) -> ScalingDecision:
    since = base.low_since_s if base.low_since_s is not None else now_s
    peak = max(base.low_peak, desired) if base.low_since_s is not None else desired
    held = replace(base, low_since_s=since, low_peak=peak)
    if base.last_up_s is not None and (
            now_s - base.last_up_s < settings.startup_s + settings.scale_down_delay_s):
        return out(current, Reason.HOLD_STARTUP, held)
    if now_s - since < settings.scale_down_delay_s:
        return out(current, Reason.HOLD_DELAY, held)
    target = min(current, max(peak, settings.min_replicas))
    return out(target, Reason.DOWN, replace(base, low_since_s=None, low_peak=0))
