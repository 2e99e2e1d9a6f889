"""A tiny random-init LLaVA-NeXT (CLIP tower + Llama, "default" features) or LLaVA-OneVision
(SigLIP tower + Qwen2, "full" features, anyres_max_9 pooling) model directory built locally from
the real configuration classes, laid out as a user's download is (config.json,
model.safetensors, tokenizer, processor with its image processor and chat template): what the
tiled adapter's tests serve through both engines and the app.

Tiles are 28x28 pixels of 7x7 patches (16 patches a tile); the grid pinpoints reach 4x4 tiles,
so an image takes a few dozen to ~300 tokens, and OneVision pools the largest grids down."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deployments.models.vlm.export import WEIGHTS_FILE, rename_tower_keys
from deployments.models.vlm.tiny_qwen_vl import VOCAB_SIZE, build_tokenizer

SPECIALS = ("<pad>", "<s>", "</s>", "<image>", "<video>", "<unk>")
TILE, PATCH = 28, 7
PINPOINTS = [[28, 56], [56, 28], [56, 56], [28, 84], [84, 28], [84, 84], [112, 112]]
MEAN, STD = [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]
MODEL_TYPES = ("llava_next", "llava_onevision")

# LLaVA's conversation form, an `<image>` per image part before the text.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'].upper() }}: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "<image>\n{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}")


def _config(model_type: str) -> object:
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaNextConfig,
        LlavaOnevisionConfig,
        Qwen2Config,
        SiglipVisionConfig,
    )

    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
              "num_attention_heads": 2, "image_size": TILE, "patch_size": PATCH}
    text = {"vocab_size": VOCAB_SIZE, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1,
            "max_position_embeddings": 2048, "bos_token_id": 1, "eos_token_id": 2,
            "pad_token_id": 0}
    ids = {"image_token_id": SPECIALS.index("<image>"), "image_grid_pinpoints": PINPOINTS}
    if model_type == "llava_next":
        return LlavaNextConfig(vision_config=CLIPVisionConfig(**vision, projection_dim=32),
                               text_config=LlamaConfig(**text),
                               vision_feature_select_strategy="default", **ids)
    if model_type == "llava_onevision":
        return LlavaOnevisionConfig(vision_config=SiglipVisionConfig(**vision),
                                    text_config=Qwen2Config(**text),
                                    video_token_id=SPECIALS.index("<video>"),
                                    vision_feature_select_strategy="full", **ids)
    raise ValueError(f"no tiny tiled LLaVA of model_type {model_type!r}; valid: "
                     f"{', '.join(MODEL_TYPES)}")


def _processor(model_type: str, tokenizer: object) -> object:
    from transformers import (
        LlavaNextImageProcessor,
        LlavaNextProcessor,
        LlavaOnevisionImageProcessor,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )

    sizes = {"image_grid_pinpoints": PINPOINTS, "image_mean": MEAN, "image_std": STD}
    if model_type == "llava_next":
        images = LlavaNextImageProcessor(size={"shortest_edge": TILE},
                                         crop_size={"height": TILE, "width": TILE}, **sizes)
        return LlavaNextProcessor(image_processor=images, tokenizer=tokenizer,
                                  patch_size=PATCH, vision_feature_select_strategy="default",
                                  num_additional_image_tokens=1,  # CLIP's class token
                                  chat_template=CHAT_TEMPLATE)
    images = LlavaOnevisionImageProcessor(size={"height": TILE, "width": TILE}, **sizes)
    video = LlavaOnevisionVideoProcessor(size={"height": TILE, "width": TILE},
                                         image_mean=MEAN, image_std=STD)
    return LlavaOnevisionProcessor(image_processor=images, tokenizer=tokenizer,
                                   video_processor=video, num_image_tokens=(TILE // PATCH) ** 2,
                                   vision_feature_select_strategy="full",
                                   chat_template=CHAT_TEMPLATE)


def build_tiny_llava_tiled(out: Path, model_type: str = "llava_next", seed: int = 0) -> Path:
    """The model directory at `out` (created), random weights from `seed`."""
    import torch
    from transformers import AutoModelForImageTextToText

    cfg = _config(model_type)
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_config(cfg).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    rename_tower_keys(out / WEIGHTS_FILE)  # `vision_tower.vision_model.*`, as published
    tokenizer = build_tokenizer(SPECIALS, CHAT_TEMPLATE, "</s>")
    tokenizer.save_pretrained(out)  # type: ignore[attr-defined]
    processor: Any = _processor(model_type, tokenizer)
    processor.image_processor.save_pretrained(out)  # preprocessor_config.json
    processor.save_pretrained(out)
    return out
