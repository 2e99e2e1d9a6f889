"""Facts of a LLaVA-style model directory both engines load (config.json + tokenizer files)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ModelDirFacts:
    path: str
    image_token_id: int
    tokens_per_image: int
    text_hidden: int
    max_position: int


def read_model_dir(path: str | Path) -> ModelDirFacts:
    """Reads config.json; a directory that is not a LLaVA-style model is a clear error."""
    p = Path(path)
    cfg_file = p / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{p} is not a model directory (no config.json)")
    cfg = json.loads(cfg_file.read_text())
    text = cfg.get("text_config") or {}
    vision = cfg.get("vision_config") or {}
    token_id = cfg.get("image_token_id", cfg.get("image_token_index"))
    if token_id is None or not text or not vision:
        raise ValueError(f"{cfg_file}: not a LLaVA-style config (needs image_token_id, "
                         "text_config and vision_config)")
    per_image = cfg.get("image_seq_length") or (vision["image_size"] // vision["patch_size"]) ** 2
    return ModelDirFacts(path=str(p), image_token_id=int(token_id),
                         tokens_per_image=int(per_image), text_hidden=int(text["hidden_size"]),
                         max_position=int(text.get("max_position_embeddings", 2048)))
