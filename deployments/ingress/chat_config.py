"""`generation:` in the application's args: the VLM behind `/v1/chat/completions` and how its
stages are laid out (docs/generation.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from deployments.autoscaling.config import EncoderAutoscaling, LLMAutoscaling
from deployments.config import StrictConfig
from deployments.ingress.chat_schemas import ChatLimits


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


class GenerationConfig(StrictConfig):
    model: str = Field("vlm", description="the model name clients send")
    model_dir: str | None = Field(
        None, description="a LLaVA-style model directory to serve (config.json, tokenizer, chat "
                          "template, safetensors); none: the project's VLM, trained on first use")
    mode: Literal["disaggregated", "monolith"] = Field(
        "disaggregated", description="encoders apart from the LLM replicas, or vLLM with "
                                     "pixels in one replica (the baseline)")
    engine: Literal["vllm", "transformers"] = "vllm"
    engine_settings: dict[str, Any] = Field(
        default_factory=dict, description="the engine's own settings (vLLM: max_model_len, "
                                          "max_num_seqs, kv_cache_gib, ...)")
    architecture: Literal["decoder_only", "cross_attention"] = Field(
        "decoder_only", description="LLM routing cost: text + image tokens (decoder-only) or "
                                    "text tokens only (cross-attention)")
    priority: Literal["deadline", "fifo"] = Field(
        "deadline", description="order of waiting work in the encoder and LLM stages: earliest "
                                "TTFT deadline first, or arrival order (the ablation's baseline)")
    routing: Literal["token", "pow2"] = Field(
        "token", description="which replica gets a call: fewest pending tokens "
                             "(deployments/generation/routers.py) or Serve's power-of-two")
    min_ttft_ms: float = Field(5.0, ge=0, description="below this TTFT SLO: 400")
    limits: ChatLimits = Field(default_factory=ChatLimits)
    encoder: EncoderStageConfig = Field(
        default_factory=lambda: EncoderStageConfig(ray_actor_options={"num_cpus": 0.25}))
    llm: LLMStageConfig = Field(default_factory=LLMStageConfig)
    history: str | None = Field(
        None, description="a past run's workload (JSON, policies/autoscaling/history.py): the "
                          "autoscaled stages' initial sizes (ModServe 4.2); none or no such "
                          "file: each stage's own initial count")
