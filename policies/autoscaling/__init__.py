"""Token-throughput autoscaling (ModServe section 4.2): one stage (`stage`), the stages
together (`app`). Pure: run by the Serve hooks and by the simulator."""

from policies.autoscaling.app import (
    ENCODER,
    LLM,
    AppScalingSettings,
    History,
    StageLoads,
    StageView,
    coordinate,
    initial_replicas,
)
from policies.autoscaling.stage import (
    Reason,
    ScalingDecision,
    ScalingSettings,
    ScalingState,
    decide,
    replicas_for,
)

__all__ = ["ENCODER", "LLM", "AppScalingSettings", "History", "Reason", "ScalingDecision",
           "ScalingSettings", "ScalingState", "StageLoads", "StageView", "coordinate", "decide",
           "initial_replicas", "replicas_for"]
