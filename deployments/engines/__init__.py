"""Generation engines behind one interface (`base.Engine`): vLLM and transformers.

`make_engine(kind, model_dir, ...)` is the registry; an unknown kind names the valid ones. The
engine modules import torch/vllm only when an engine starts, so importing this package is cheap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deployments.engines.base import (
    Engine,
    EngineError,
    EngineInfo,
    GenerationRequest,
    PromptTooLong,
    TokenDelta,
)

ENGINE_KINDS = ("vllm", "transformers")

__all__ = ["ENGINE_KINDS", "Engine", "EngineError", "EngineInfo", "GenerationRequest",
           "PromptTooLong", "TokenDelta", "make_engine"]


def make_engine(kind: str, model_dir: str | Path, settings: dict[str, Any] | None = None
                ) -> Engine:
    """A not yet started engine of `kind` for the model directory."""
    settings = dict(settings or {})
    if kind == "vllm":
        from deployments.engines.vllm_engine import VllmEngine, VllmSettings

        return VllmEngine(model_dir, VllmSettings(**settings))
    if kind == "transformers":
        from deployments.engines.engine_args import check_engine_settings
        from deployments.engines.hf import TransformersEngine

        check_engine_settings(kind, settings)
        return TransformersEngine(model_dir, settings.get("max_model_len"),
                                  bool(settings.get("trust_remote_code", False)))
    raise ValueError(f"unknown engine {kind!r}; valid: {list(ENGINE_KINDS)}")
