"""`generation:` in the application's args: the VLM behind `/v1/chat/completions`, the chat
limits and how its stages are laid out (the stages' own config:
deployments/generation/stage_config.py; docs/generation.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from deployments.config import StrictConfig
from deployments.generation.stage_config import EncoderStageConfig, LLMStageConfig
from deployments.ingress.chat.schemas import ChatLimits


class GenerationConfig(StrictConfig):
    model: str = Field("vlm", description="the model name clients send")
    model_dir: str | None = Field(
        None, description="a model directory to serve (config.json, tokenizer, chat template, "
                          "safetensors; its config.json's model_type picks the adapter: "
                          "docs/own_models.md), loaded by every replica from this path on its "
                          "node: on a cluster, a path every node sees (docs/deploy.md, Model "
                          "directories); none: the project's VLM, trained on first use")
    chat_template: str | None = Field(
        None, description="a Jinja chat template file replacing the model directory's own "
                          "(the ingress renders every prompt with it); none: the model's")
    mode: Literal["disaggregated", "monolith"] = Field(
        "disaggregated", description="encoders apart from the LLM replicas, or vLLM with "
                                     "pixels in one replica (the baseline)")
    engine: Literal["vllm", "transformers"] = "vllm"
    engine_settings: dict[str, Any] = Field(
        default_factory=dict, description="the engine's own settings (vLLM: max_model_len, "
                                          "max_num_seqs, kv_cache_gib, dtype, enforce_eager, "
                                          "max_images, gpu_memory_utilization, and "
                                          "engine_kwargs: AsyncEngineArgs passed through)")
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

    @model_validator(mode="after")
    def _engine_settings_fit_the_engine(self) -> GenerationConfig:
        """Misspelt or out-of-range engine settings fail the config, not a replica later
        (vLLM's engine_kwargs are checked against its fields by the builder, which may import
        vllm: app/chat_graph.py)."""
        from deployments.engines.engine_args import check_engine_settings

        check_engine_settings(self.engine, self.engine_settings)
        return self
