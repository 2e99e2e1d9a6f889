"""What the Serve autoscaling hooks (serve_hooks.py) compute from Serve's `AutoscalingContext`:
each stage's load (the sum of its running replicas' reported rates, as Serve averaged them over
`look_back_period_s`), its `ScalingSettings` (the policy_kwargs the builder wrote, bounds from
the context), and one decision per call through policies.autoscaling (`decide` for a
deployment alone, `coordinate` for the encoder and LLM stages together). Each decision also
yields a plain-dict record (stage, load, capacity, desired, target, reason, time) for
/v1/status and Prometheus (ledger.py).

The contexts are duck-typed (Serve's class, or anything with its attributes): this module
imports nothing of Ray's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from policies.autoscaling import (
    ENCODER,
    LLM,
    AppScalingSettings,
    ScalingDecision,
    ScalingSettings,
    ScalingState,
    StageLoads,
    StageView,
    coordinate,
    decide,
)
from policies.generation.token_routing import Architecture

CLASSIFIER = "classifier"
STAGE_KINDS = (ENCODER, LLM, CLASSIFIER)
STATE_KEY = "adaptserve_state"  # our ScalingState inside Serve's policy_state
# what each kind of replica reports (record_autoscaling_stats) and the policy sums
IMAGE_TOKENS = "image_tokens_per_s"
TEXT_TOKENS = "text_tokens_per_s"
ITEMS = "items_per_s"
SLO_ATTAINMENT = "slo_attainment"
SETTING_KEYS = ("target_utilization", "scale_down_delay_s", "startup_s", "trend_window_s",
                "slo_attainment_floor")
RULE_KEYS = ("stage", "capacity_per_s", "architecture", "unit", *SETTING_KEYS)


@dataclass(frozen=True)
class StageRule:
    """One deployment's policy_kwargs, checked."""

    stage: str
    capacity_per_s: float
    settings: Mapping[str, float]  # ScalingSettings' fields but the capacity and bounds
    architecture: Architecture = Architecture.DECODER_ONLY
    unit: str = "tokens/s"
    # settings already made, by bounds (Serve's bounds change only with target capacity)
    _made: dict[tuple[Any, ...], Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The reported rates that make this stage's load."""
        if self.stage == ENCODER:
            return (IMAGE_TOKENS,)
        if self.stage == CLASSIFIER:
            return (ITEMS,)
        if self.architecture is Architecture.CROSS_ATTENTION:
            return (TEXT_TOKENS,)
        return (TEXT_TOKENS, IMAGE_TOKENS)

    def scaling(self, min_replicas: int, max_replicas: int) -> ScalingSettings:
        key = (min_replicas, max_replicas)
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = ScalingSettings(
                self.capacity_per_s, min_replicas=min_replicas,
                max_replicas=max(1, max_replicas), **self.settings)
        return made

    def coordinated(self, encoder: ScalingSettings, llm: ScalingSettings) -> AppScalingSettings:
        """The stages' settings together (this rule being the LLM's), made once per pair."""
        key = ("app", id(encoder), id(llm))
        made = self._made.get(key)
        if made is None or made.encoder is not encoder or made.llm is not llm:
            made = self._made[key] = AppScalingSettings(encoder, llm, self.architecture)
        return made


def rule_from_kwargs(kwargs: Mapping[str, Any]) -> StageRule:
    unknown = sorted(set(kwargs) - set(RULE_KEYS))
    if unknown:
        raise ValueError(f"unknown autoscaling policy_kwargs {unknown}; valid: {list(RULE_KEYS)}")
    stage = kwargs.get("stage")
    if stage not in STAGE_KINDS:
        raise ValueError(f"policy_kwargs stage {stage!r}; valid: {list(STAGE_KINDS)}")
    capacity = float(kwargs.get("capacity_per_s", 0.0))
    if not (capacity > 0 and math.isfinite(capacity)):
        raise ValueError(f"policy_kwargs capacity_per_s must be finite and > 0, got {capacity}")
    settings = {k: float(kwargs[k]) for k in SETTING_KEYS if k in kwargs}
    ScalingSettings(capacity, **settings)  # type: ignore[arg-type]  # fails early when bad
    return StageRule(stage, capacity, settings,
                     Architecture.parse(kwargs.get("architecture", "decoder_only")),
                     str(kwargs.get("unit", "items/s" if stage == CLASSIFIER else "tokens/s")))


def reported(ctx: Any, metric: str) -> float:
    """The sum over the running replicas of what they reported (Serve's look-back average)."""
    per_replica = (ctx.aggregated_metrics or {}).get(metric) or {}
    total = 0.0
    for value in per_replica.values():
        if value == value and value > 0:  # NaN and negatives count as nothing
            total += value
    return total


def load_of(ctx: Any, metrics: Sequence[str]) -> float:
    return sum(reported(ctx, m) for m in metrics)


def attainment_of(ctx: Any) -> float | None:
    """The worst replica's reported SLO attainment (None when none reports one)."""
    values = [v for v in ((ctx.aggregated_metrics or {}).get(SLO_ATTAINMENT) or {}).values()
              if v == v]
    return min(values) if values else None


def state_of(ctx: Any) -> ScalingState:
    state = (ctx.policy_state or {}).get(STATE_KEY)
    return state if isinstance(state, ScalingState) else ScalingState()


def view_of(ctx: Any) -> StageView:
    return StageView(int(ctx.target_num_replicas), int(ctx.current_num_replicas), state_of(ctx),
                     attainment_of(ctx))


def settings_of(ctx: Any, rule: StageRule) -> ScalingSettings:
    return rule.scaling(int(ctx.capacity_adjusted_min_replicas),
                        int(ctx.capacity_adjusted_max_replicas))


def now_of(ctx: Any) -> float:
    return float(ctx.current_time) if ctx.current_time is not None else 0.0


def record_of(ctx: Any, rule: StageRule, d: ScalingDecision, scope: str) -> dict[str, Any]:
    """The decision as /v1/status and Prometheus show it (plain JSON types)."""
    return {"deployment": ctx.deployment_name, "application": ctx.app_name,
            "stage": rule.stage, "scope": scope, "unit": rule.unit,
            "load_per_s": round(d.load_tokens_per_s, 3),
            "forecast_per_s": round(d.forecast_tokens_per_s, 3),
            "capacity_per_s": round(rule.capacity_per_s, 3),
            "desired": d.desired, "target": d.replicas,
            "previous_target": int(ctx.target_num_replicas),
            "running": int(ctx.current_num_replicas), "reason": d.reason.value,
            "time_s": round(now_of(ctx), 3)}


def new_state(ctx: Any, state: ScalingState) -> dict[str, Any]:
    """Serve's policy_state with ours replaced (Serve merges its own keys back in)."""
    return {**(ctx.policy_state or {}), STATE_KEY: state}


def decide_alone(ctx: Any, rule: StageRule) -> tuple[ScalingDecision, dict[str, Any]]:
    """One deployment by its own reported load (no coordination)."""
    view = view_of(ctx)
    d = decide(settings_of(ctx, rule), view.target, load_of(ctx, rule.metrics), now_of(ctx),
               view.state, view.slo_attainment)
    return d, record_of(ctx, rule, d, "deployment")


def decide_stages(enc: tuple[Any, StageRule] | None, llm: tuple[Any, StageRule]
                  ) -> dict[str, tuple[ScalingDecision, dict[str, Any]]]:
    """The encoder and LLM stages together (`coordinate`); `enc` None: the monolith."""
    llm_ctx, llm_rule = llm
    enc_settings = settings_of(enc[0], enc[1]) if enc is not None else settings_of(
        llm_ctx, llm_rule)
    app = llm_rule.coordinated(enc_settings, settings_of(llm_ctx, llm_rule))
    views = {LLM: view_of(llm_ctx)}
    loads = StageLoads(text_tokens_per_s=reported(llm_ctx, TEXT_TOKENS),
                       llm_image_tokens_per_s=reported(llm_ctx, IMAGE_TOKENS))
    if enc is not None:
        views[ENCODER] = view_of(enc[0])
        loads = replace(loads, image_tokens_per_s=reported(enc[0], IMAGE_TOKENS))
    out = coordinate(app, views, loads, now_of(llm_ctx))
    pairs = {LLM: llm} if enc is None else {LLM: llm, ENCODER: enc}
    return {stage: (d, record_of(pairs[stage][0], pairs[stage][1], d, "application"))
            for stage, d in out.items()}
