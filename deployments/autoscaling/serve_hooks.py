"""The Serve autoscaling policies (docs/autoscaling.md), verified against Ray Serve 2.60's source:

- `StagePolicy`, a deployment's `AutoscalingConfig.policy` (policy_function
  "deployments.autoscaling.serve_hooks:StagePolicy", policy_kwargs from
  app/autoscaling.py): a class, so Serve instantiates it once with the kwargs and calls
  `instance(ctx) -> (replicas, policy_state)` every control-loop tick (0.1 s);
- `CoordinatedPolicy`, the application's `autoscaling_policy` (serve_config.vlm.yaml): called
  with every autoscaling deployment's context, `-> ({deployment_id: replicas},
  {deployment_id: policy_state})`; it sizes the encoder and LLM stages together (each one's
  settings are its own deployment policy's kwargs) and any other deployment alone.

Serve wraps both: it applies upscale/downscale delays and scaling factors after the policy
(the builder sets the delays to 0 and leaves the factors at 1, so the hysteresis here is the
only one), then min/max. Serve cloudpickles the module naming the policy by value, so this one
stays thin: the work is in decisions.py and ledger.py, imported by reference.
"""

from __future__ import annotations

import logging
from typing import Any

from deployments.autoscaling.decisions import (
    CLASSIFIER,
    StageRule,
    decide_alone,
    decide_stages,
    new_state,
    rule_from_kwargs,
)
from deployments.autoscaling.ledger import Publisher
from policies.autoscaling import ENCODER, LLM

log = logging.getLogger(__name__)


class StagePolicy:
    def __init__(self, publish: bool = True, **kwargs: Any) -> None:
        self.rule = rule_from_kwargs(kwargs)
        self.publish = publish
        self.publisher: Publisher | None = None

    def __call__(self, ctx: Any) -> tuple[int, dict[str, Any]]:
        d, record = decide_alone(ctx, self.rule)
        if self.publish:
            if self.publisher is None:
                self.publisher = Publisher(ctx.app_name)
            self.publisher.offer([record])
        return d.replicas, new_state(ctx, d.state)


class CoordinatedPolicy:
    def __init__(self, publish: bool = True) -> None:
        self.publish = publish
        self.publisher: Publisher | None = None
        self._rules: dict[Any, tuple[int, StageRule | None]] = {}

    def rule(self, dep_id: Any, ctx: Any) -> StageRule | None:
        """The deployment's own policy kwargs (cached while its config is the same object);
        None for a deployment without our policy (left to Serve: no decision)."""
        cached = self._rules.get(dep_id)
        if cached is not None and cached[0] == id(ctx.config):
            return cached[1]
        try:
            kwargs = dict(ctx.config.policy.policy_kwargs)
            kwargs.pop("publish", None)  # the deployment policy's own switch
            rule: StageRule | None = rule_from_kwargs(kwargs)
        except (ValueError, TypeError, AttributeError) as exc:
            log.warning("%s: not sized by the coordinated policy (%s)", dep_id, exc)
            rule = None
        self._rules[dep_id] = (id(ctx.config), rule)
        return rule

    def __call__(self, contexts: dict[Any, Any]
                 ) -> tuple[dict[Any, int], dict[Any, dict[str, Any]]]:
        by_stage: dict[str, tuple[Any, Any, StageRule]] = {}
        alone: list[tuple[Any, Any, StageRule]] = []
        for dep_id, ctx in contexts.items():
            rule = self.rule(dep_id, ctx)
            if rule is None:
                continue
            if rule.stage != CLASSIFIER and rule.stage not in by_stage:
                by_stage[rule.stage] = (dep_id, ctx, rule)
            else:
                alone.append((dep_id, ctx, rule))
        decisions: dict[Any, int] = {}
        states: dict[Any, dict[str, Any]] = {}
        records = []
        if LLM in by_stage:
            enc = by_stage.get(ENCODER)
            llm = by_stage[LLM]
            out = decide_stages(None if enc is None else (enc[1], enc[2]), (llm[1], llm[2]))
            for stage, (d, record) in out.items():
                dep_id, ctx, _ = by_stage[stage]
                decisions[dep_id], states[dep_id] = d.replicas, new_state(ctx, d.state)
                records.append(record)
        elif ENCODER in by_stage:  # encoders without an LLM stage: sized alone
            alone.append(by_stage[ENCODER])
        for dep_id, ctx, rule in alone:
            d, record = decide_alone(ctx, rule)
            decisions[dep_id], states[dep_id] = d.replicas, new_state(ctx, d.state)
            records.append(record)
        if self.publish and records:
            if self.publisher is None:
                self.publisher = Publisher(next(iter(contexts.values())).app_name)
            self.publisher.offer(records)
        return decisions, states
