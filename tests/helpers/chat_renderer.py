"""The VLM's tokenizer and the ingress's PromptRenderer over the same files, without the
model's weights (the `both` fixture of tests/unit/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

from deployments.generation.model_files import ModelDir
from deployments.generation.prompt import PromptRenderer
from deployments.models.vlm.tokenizer import build_tokenizer


def tokenizer_and_renderer(directory: Path) -> tuple[object, PromptRenderer]:
    """The tokenizer, saved into `directory`, and a renderer reading the saved files."""
    tok = build_tokenizer()
    tok.save_pretrained(directory)
    return tok, PromptRenderer(prompt_model_dir(directory, tok))


def prompt_model_dir(directory: Path, tok: object) -> ModelDir:
    """`directory` (the saved tokenizer files) with a LLaVA-style config.json naming its image
    token written into it (no weights)."""
    (directory / "config.json").write_text(json.dumps({
        "model_type": "llava", "image_token_id": tok.convert_tokens_to_ids("<image>"),  # type: ignore[attr-defined]
        "image_seq_length": 64, "vision_config": {"image_size": 112, "patch_size": 14},
        "text_config": {"hidden_size": 64, "max_position_embeddings": 256}}))
    return ModelDir.at(directory, "vlm")
