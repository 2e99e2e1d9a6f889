"""The VLM's language model alone, as a text-only Llama directory (`LlamaForCausalLM`, its own
tokenizer and chat template): a text-only causal LM built locally, served through the same
adapters as any user's Llama (deployments/engines/architectures.py). It answers the VLM's text
questions (the arithmetic ones) as the VLM does, without images."""

from __future__ import annotations

import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
                   "generation_config.json", "special_tokens_map.json")


def export_language_model(vlm_dir: Path, out: Path) -> Path:
    """Write the language model of the LLaVA directory `vlm_dir` to `out` (made; returned):
    config.json (a LlamaConfig from its text_config), model.safetensors, the tokenizer files."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, LlavaForConditionalGeneration

    vlm = LlavaForConditionalGeneration.from_pretrained(vlm_dir, dtype=torch.float32)
    text = vlm.config.text_config.to_dict()
    for key in ("model_type", "architectures", "transformers_version", "_name_or_path"):
        text.pop(key, None)
    config = LlamaConfig(**text, architectures=["LlamaForCausalLM"])
    lm = LlamaForCausalLM(config).eval()
    lm.model.load_state_dict(vlm.model.language_model.state_dict())
    lm.lm_head.load_state_dict(vlm.lm_head.state_dict())
    out.mkdir(parents=True, exist_ok=True)
    lm.save_pretrained(out, safe_serialization=True)
    for name in TOKENIZER_FILES:
        if (vlm_dir / name).is_file():
            shutil.copyfile(vlm_dir / name, out / name)
    return out
