"""How the generation stages are laid out: replicas, actor options and autoscaling of the image
encoders and the LLM replicas (`generation.encoder` / `generation.llm` in the application's
args, deployments/ingress/chat/config.py)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from deployments.autoscaling.config import EncoderAutoscaling, LLMAutoscaling
from deployments.config import StrictConfig


class StageConfig(StrictConfig):
    num_replicas: int = Field(1, ge=1, description="fixed replicas (without `autoscaling`); "
                                                   "with it, the initial count if no other")
    ray_actor_options: dict[str, Any] = Field(default_factory=lambda: {"num_cpus": 0.5})
    max_ongoing_requests: int = Field(256, ge=1)


class LLMStageConfig(StageConfig):
    autoscaling: LLMAutoscaling | None = Field(
        None, description="prompt-token autoscaling (docs/autoscaling.md); none: num_replicas")


class EncoderStageConfig(StageConfig):
    max_batch_images: int = Field(8, ge=1, description="images per encoder batch")
    max_queued_images: int = Field(256, ge=1)
    autoscaling: EncoderAutoscaling | None = Field(
        None, description="image-token autoscaling (docs/autoscaling.md); none: num_replicas")

    @property
    def fan_out(self) -> int:
        """Image groups per request at most: one per encoder replica there can be (autoscaled:
        the most there can be; the image-token router spreads the groups over the running
        ones, so a request's images still go out in parallel after a scale-up)."""
        return self.autoscaling.max_replicas if self.autoscaling else self.num_replicas
