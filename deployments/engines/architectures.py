"""What a model directory's `config.json` says about serving it, one adapter per `model_type`,
chosen automatically (json only: the ingress, the builder and both engines read it):

- `llava` (LLaVA 1.5-style: a CLIP-like vision tower, a projector, a decoder-only LM): images as
  a fixed number of tokens each (`image_seq_length`, else (image_size / patch_size)^2), one
  placeholder token per image in the prompt that the engines expand; the encoder stage runs the
  vision tower and projector apart.
- text-only causal LMs (`llama`, `mistral`, `qwen2`, `qwen3`, `gemma`, `gemma2`, `phi3`,
  `granite`): no images (a request with one is a 400), no encoder stage.

Anything else is refused where the config is loaded, naming the supported types. The tokens
per image are computed here once and reach the routers, the autoscaler, `usage` and the engines
from here."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VISION_LANGUAGE = ("llava",)
TEXT_ONLY = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "granite")
SUPPORTED = (*VISION_LANGUAGE, *TEXT_ONLY)


@dataclass(frozen=True)
class ModelFacts:
    model_type: str
    image_token_id: int | None  # None: the model takes no images
    tokens_per_image: int  # 0: no images
    text_hidden: int
    max_position: int

    @property
    def takes_images(self) -> bool:
        return self.image_token_id is not None

    @property
    def adapter(self) -> str:
        return "llava" if self.model_type in VISION_LANGUAGE else "causal_lm"


def model_facts(cfg: dict[str, Any], where: str = "config.json") -> ModelFacts:
    """The adapter's facts of a parsed config.json (ValueError: an unsupported model type, or
    a config its adapter cannot read, naming what is missing)."""
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED:
        raise ValueError(f"{where}: model_type {model_type!r} has no adapter; supported: "
                         f"{list(SUPPORTED)}")
    if model_type in TEXT_ONLY:
        return ModelFacts(model_type, None, 0, int(cfg["hidden_size"]),
                          int(cfg.get("max_position_embeddings", 2048)))
    text = cfg.get("text_config") or {}
    vision = cfg.get("vision_config") or {}
    token_id = cfg.get("image_token_id", cfg.get("image_token_index"))
    if token_id is None or not text or not vision:
        raise ValueError(f"{where}: not a LLaVA-style config (needs image_token_id, "
                         "text_config and vision_config)")
    per_image = cfg.get("image_seq_length") or (vision["image_size"] // vision["patch_size"]) ** 2
    return ModelFacts(model_type, int(token_id), int(per_image), int(text["hidden_size"]),
                      int(text.get("max_position_embeddings", 2048)))


def read_facts(model_dir: str | Path) -> ModelFacts:
    p = Path(model_dir) / "config.json"
    if not p.is_file():
        raise FileNotFoundError(f"{Path(model_dir)} is not a model directory (no config.json)")
    return model_facts(json.loads(p.read_text()), str(p))
