"""The project's vision-language model: a small LLaVA (CLIP vision tower + MLP projector +
Llama decoder, our own byte-level BPE tokenizer) trained on tasks made from scikit-learn's
digits, saved as a model directory that transformers and vLLM both load (docs/vlm.md).

    from deployments.models.vlm import ensure_vlm, load_model, load_processor, image_embeddings
    model_dir = ensure_vlm()                      # trains once (a few minutes), then instant
    model, processor = load_model(model_dir), load_processor(model_dir)
    embeds = image_embeddings(model, processor, pil_images)   # [n, 16, 128] for vLLM
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from PIL import Image
from transformers import LlavaForConditionalGeneration, LlavaProcessor

from deployments.models.vlm.cache import ensure_vlm, model_dir_for
from deployments.models.vlm.config import VlmConfig
from deployments.models.vlm.export import load_model, load_processor, read_meta
from deployments.models.vlm.model import encode_images
from deployments.models.vlm.prompts import messages, prompt_text, question

__all__ = ["VlmConfig", "encode_images", "ensure_vlm", "image_embeddings", "load_model",
           "load_processor", "messages", "model_dir_for", "preprocess", "prompt_text",
           "question", "read_meta", "task_messages"]


def preprocess(processor: LlavaProcessor, images: Sequence[Image.Image]) -> torch.Tensor:
    """Normalised pixels [n, 3, H, W] of PIL images, as the model was trained (any size is
    resized to the tower's resolution)."""
    out = processor.image_processor(images=list(images), return_tensors="pt")
    pixels = out["pixel_values"]
    assert isinstance(pixels, torch.Tensor)
    return pixels


@torch.no_grad()
def image_embeddings(model: LlavaForConditionalGeneration, processor: LlavaProcessor,
                     images: Sequence[Image.Image]) -> torch.Tensor:
    """The encoder stage on PIL images: embeddings [n, tokens, hidden] in the images' order."""
    pixels = preprocess(processor, images).to(model.device, model.dtype)
    return encode_images(model, pixels)


def task_messages(task: str, num_images: int = 1, a: int = 0, op: str = "plus",
                  b: int = 0) -> list[dict[str, object]]:
    """OpenAI-style messages of a task: "digit" (one image), "sequence" (`num_images` images,
    read in order) or "arithmetic" (text only: a op b). Image parts are `{"type": "image"}`
    placeholders; an API client puts `image_url` parts in their place."""
    if task == "digit" and num_images != 1:
        raise ValueError(f"the digit task takes one image, not {num_images}")
    images = 0 if task == "arithmetic" else num_images
    return messages(question(task, a, op, b), images)
