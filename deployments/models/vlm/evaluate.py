"""Held-out accuracy per task: exact match of the greedy answer text (transformers generate)."""

from __future__ import annotations

import logging
from collections import defaultdict

import torch
from transformers import LlavaForConditionalGeneration, PreTrainedTokenizerFast

from deployments.models.vlm import data
from deployments.models.vlm.config import VlmConfig
from deployments.models.vlm.model import pixel_values
from deployments.models.vlm.prompts import prompt_ids

log = logging.getLogger(__name__)


@torch.no_grad()
def greedy_answers(model: LlavaForConditionalGeneration, tok: PreTrainedTokenizerFast,
                   cfg: VlmConfig, examples: list[data.Example], images: torch.Tensor,
                   batch_size: int = 32) -> list[str]:
    """Greedy answers of `examples` (images: uint8 renderings the image ids index). Examples
    are grouped by prompt length, so batches need no padding."""
    groups: dict[int, list[int]] = defaultdict(list)
    prompts = [prompt_ids(tok, e.text, len(e.image_ids), cfg.vision.tokens_per_image)
               for e in examples]
    for i, p in enumerate(prompts):
        groups[len(p)].append(i)
    answers = [""] * len(examples)
    for members in groups.values():
        for start in range(0, len(members), batch_size):
            chunk = members[start:start + batch_size]
            ids = torch.tensor([prompts[i] for i in chunk])
            image_ids = [j for i in chunk for j in examples[i].image_ids]
            extra = {"pixel_values": pixel_values(images[image_ids])} if image_ids else {}
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 do_sample=False, max_new_tokens=cfg.data.max_images + 1,
                                 **extra)
            for i, row in zip(chunk, out[:, ids.shape[1]:], strict=True):
                answers[i] = tok.decode(row, skip_special_tokens=True).strip()
    return answers


def held_out_accuracy(model: LlavaForConditionalGeneration, tok: PreTrainedTokenizerFast,
                      cfg: VlmConfig) -> dict[str, float]:
    """Exact-match accuracy of every task on its held-out examples."""
    splits = data.digit_splits(cfg.data)
    images = data.render(splits["test"].images, cfg.vision.image_size_px, cfg.data)
    out = {}
    for task, examples in data.test_examples(cfg.data, splits).items():
        answers = greedy_answers(model, tok, cfg, examples, images)
        out[task] = sum(a == e.answer for a, e in zip(answers, examples, strict=True)) / len(examples)
        log.info("vlm held-out %s accuracy %.4f (%d examples)", task, out[task], len(examples))
    return out


def sequence_accuracy_by_count(model: LlavaForConditionalGeneration,
                               tok: PreTrainedTokenizerFast, cfg: VlmConfig,
                               per_count: int = 25) -> dict[int, float]:
    """Held-out `sequence` exact match per number of images (`per_count` requests each)."""
    splits = data.digit_splits(cfg.data)
    images = data.render(splits["test"].images, cfg.vision.image_size_px, cfg.data)
    gen = torch.Generator().manual_seed(cfg.data.seed * 7919 + 31)
    out = {}
    for n in range(1, cfg.data.max_images + 1):
        examples = data.sequence_examples(splits["test"], per_count, cfg.data.max_images, gen,
                                          num_images=n)
        answers = greedy_answers(model, tok, cfg, examples, images)
        out[n] = sum(a == e.answer for a, e in zip(answers, examples, strict=True)) / per_count
    return out
