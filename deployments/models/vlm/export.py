"""The model directory that both transformers and vLLM load.

`save_model_dir` writes transformers' files, then rewrites the checkpoint keys `vision_tower.*`
as `vision_tower.vision_model.*` (vLLM's loader wants them; transformers loads both), and saves
the tokenizer (with its chat template), the `CLIPImageProcessor` (`preprocessor_config.json`) and
the `LlavaProcessor` (`processor_config.json`). See docs/vlm.md.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from transformers import (
    AutoProcessor,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    PreTrainedTokenizerFast,
)

from deployments.models.vlm.config import VlmConfig
from deployments.models.vlm.model import image_processor
from deployments.models.vlm.tokenizer import CHAT_TEMPLATE, IMAGE

log = logging.getLogger(__name__)

WEIGHTS_FILE = "model.safetensors"
META_FILE = "vlm.json"
TOWER_PREFIX, VLLM_TOWER_PREFIX = "vision_tower.", "vision_tower.vision_model."


def processor_for(cfg: VlmConfig, tok: PreTrainedTokenizerFast) -> LlavaProcessor:
    """The LlavaProcessor: `<image>` expands to `tokens_per_image` tokens (the class token is
    counted, then dropped by the "default" feature strategy)."""
    return LlavaProcessor(image_processor=image_processor(cfg), tokenizer=tok,
                          patch_size=cfg.vision.patch_size_px,
                          vision_feature_select_strategy="default", image_token=IMAGE,
                          num_additional_image_tokens=1, chat_template=CHAT_TEMPLATE)


def rename_tower_keys(path: Path) -> None:
    """The checkpoint's vision tower keys in the published layout (vLLM loads only that)."""
    with safe_open(str(path), "pt") as handle:
        metadata = handle.metadata()
    state = load_file(str(path))
    renamed = {(VLLM_TOWER_PREFIX + k[len(TOWER_PREFIX):]
                if k.startswith(TOWER_PREFIX) and not k.startswith(VLLM_TOWER_PREFIX) else k): v
               for k, v in state.items()}
    save_file(renamed, str(path), metadata=metadata)


def save_model_dir(model: LlavaForConditionalGeneration, tok: PreTrainedTokenizerFast,
                   cfg: VlmConfig, out_dir: Path, meta: dict[str, Any]) -> None:
    """Write the complete model directory into `out_dir` (which must not hold another)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    weights = out_dir / WEIGHTS_FILE
    if not weights.is_file():
        raise RuntimeError(f"expected one weights file {weights}; found "
                           f"{sorted(p.name for p in out_dir.iterdir())}")
    rename_tower_keys(weights)
    tok.save_pretrained(out_dir)
    processor = processor_for(cfg, tok)
    processor.image_processor.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2, default=str))


def read_meta(model_dir: Path) -> dict[str, Any] | None:
    """The model directory's metadata (None when absent or unreadable)."""
    try:
        meta = json.loads((Path(model_dir) / META_FILE).read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def load_model(model_dir: Path, device: str = "cpu") -> LlavaForConditionalGeneration:
    """The trained model in eval mode, float32."""
    model = LlavaForConditionalGeneration.from_pretrained(str(model_dir), dtype=torch.float32)
    return model.to(torch.device(device)).eval()


def load_processor(model_dir: Path) -> LlavaProcessor:
    """The processor (tokenizer + image processor) saved with the model."""
    processor = AutoProcessor.from_pretrained(str(model_dir))
    if not isinstance(processor, LlavaProcessor):
        raise TypeError(f"{model_dir}: expected a LlavaProcessor, got {type(processor).__name__}")
    return processor
