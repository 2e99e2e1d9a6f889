"""Prompts of the VLM's tasks: OpenAI-style chat messages, rendered by the tokenizer's chat
template, and the token ids training and evaluation feed the model."""

from __future__ import annotations

from typing import Any

import torch
from transformers import PreTrainedTokenizerFast

from deployments.models.vlm.tokenizer import IMAGE, number_word

IGNORE_INDEX = -100
QUESTIONS = {"digit": "which digit is this?", "sequence": "read the digits"}
OPERATORS = ("plus", "minus")


def question(task: str, a: int = 0, op: str = "plus", b: int = 0) -> str:
    """The question text of `task` ("digit", "sequence" or "arithmetic": a op b)."""
    if task == "arithmetic":
        if op not in OPERATORS:
            raise ValueError(f"unknown operator {op!r}; valid: {OPERATORS}")
        return f"what is {number_word(a)} {op} {number_word(b)}?"
    if task not in QUESTIONS:
        raise ValueError(f"unknown task {task!r}; valid: {sorted(QUESTIONS) + ['arithmetic']}")
    return QUESTIONS[task]


def messages(text: str, num_images: int) -> list[dict[str, Any]]:
    """One user turn: `num_images` image parts (in order) then the text part."""
    parts: list[dict[str, Any]] = [{"type": "image"} for _ in range(num_images)]
    parts.append({"type": "text", "text": text})
    return [{"role": "user", "content": parts}]


def prompt_text(tokenizer: PreTrainedTokenizerFast, text: str, num_images: int) -> str:
    """The rendered prompt (one `<image>` placeholder per image), ending in "assistant:"."""
    rendered = tokenizer.apply_chat_template(messages(text, num_images), tokenize=False,
                                             add_generation_prompt=True)
    assert isinstance(rendered, str)
    return rendered


def prompt_ids(tokenizer: PreTrainedTokenizerFast, text: str, num_images: int,
               tokens_per_image: int) -> list[int]:
    """Prompt token ids with every `<image>` expanded to `tokens_per_image` image tokens (as
    the processor and vLLM do)."""
    image_id = tokenizer.convert_tokens_to_ids(IMAGE)
    ids: list[int] = tokenizer(prompt_text(tokenizer, text, num_images),
                               add_special_tokens=False).input_ids
    out: list[int] = []
    for token in ids:
        out.extend([token] * tokens_per_image if token == image_id else [token])
    return out


def answer_ids(tokenizer: PreTrainedTokenizerFast, answer: str) -> list[int]:
    """What the model generates for `answer`: " answer" then eos."""
    ids: list[int] = tokenizer(" " + answer, add_special_tokens=False).input_ids
    return ids + [tokenizer.eos_token_id]


def training_batch(tokenizer: PreTrainedTokenizerFast, rows: list[tuple[str, int, str]],
                   tokens_per_image: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """input_ids, attention_mask and labels (loss on the answer and eos only) of (text,
    num_images, answer) rows, right-padded."""
    seqs, labels = [], []
    for text, num_images, answer in rows:
        prompt = prompt_ids(tokenizer, text, num_images, tokens_per_image)
        target = answer_ids(tokenizer, answer)
        seqs.append(prompt + target)
        labels.append([IGNORE_INDEX] * len(prompt) + target)
    width = max(len(s) for s in seqs)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    lab = torch.tensor([s + [IGNORE_INDEX] * (width - len(s)) for s in labels])
    return ids, mask, lab
