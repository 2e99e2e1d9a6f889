"""Stage costs of the VLM measured in torch (the shape docs/vlm.md shows): image encoding per
batch of images, decoder prefill per prompt, decode step per batch, and the encoder's share of
the time to first token of a request with n images (all its images encoded as one batch, then
the prefill of its prompt)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import DynamicCache, LlavaForConditionalGeneration, PreTrainedTokenizerFast

from deployments.models.vlm import data
from deployments.models.vlm.config import VlmConfig
from deployments.models.vlm.model import encode_images, pixel_values
from deployments.models.vlm.prompts import prompt_ids, question

ENCODER_BATCHES = (1, 2, 4, 8, 16)
PROMPT_IMAGES = (0, 1, 4, 8)
DECODE_BATCHES = (1, 4, 16)
PREFILL_BATCHES = (1, 4)


@dataclass(frozen=True)
class StageCosts:
    """Median milliseconds; keys are batch sizes or images per prompt."""

    encoder_ms: dict[int, float]
    prefill_ms: dict[int, float]
    prefill_tokens: dict[int, int]
    prefill_batch_ms: dict[int, float]
    decode_step_ms: dict[int, float]
    encoder_share_of_ttft: dict[int, float]
    torch_threads: int


def median_ms(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of `fn` in ms over `repeats` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def _prompt_embeds(model: LlavaForConditionalGeneration, tok: PreTrainedTokenizerFast,
                   cfg: VlmConfig, num_images: int, batch: int = 1) -> torch.Tensor:
    task = "sequence" if num_images else "arithmetic"
    text = question(task, 2, "plus", 3)
    ids = torch.tensor([prompt_ids(tok, text, num_images, cfg.vision.tokens_per_image)] * batch)
    embeds = model.get_input_embeddings()(ids)
    slots = (ids == model.config.image_token_id).unsqueeze(-1).expand_as(embeds)
    fill = torch.randn(int(slots.sum()) // embeds.shape[-1], embeds.shape[-1]) * 0.1
    return embeds.masked_scatter(slots, fill)


def _prefill(model: LlavaForConditionalGeneration, embeds: torch.Tensor) -> DynamicCache:
    out = model.model.language_model(inputs_embeds=embeds, use_cache=True)
    model.lm_head(out.last_hidden_state[:, -1:])
    assert isinstance(out.past_key_values, DynamicCache)
    return out.past_key_values


def _decode_ms(model: LlavaForConditionalGeneration, tok: PreTrainedTokenizerFast,
               cfg: VlmConfig, batch: int, repeats: int) -> float:
    embeds = _prompt_embeds(model, tok, cfg, 4, batch)
    cache = _prefill(model, embeds)
    length = embeds.shape[1]
    token = torch.full((batch, 1), tok.eos_token_id)
    position = torch.full((batch, 1), length)

    def step() -> None:
        out = model.model.language_model(input_ids=token, past_key_values=cache,
                                         position_ids=position, use_cache=True)
        model.lm_head(out.last_hidden_state)
        cache.crop(-1)

    return median_ms(step, repeats)


@torch.no_grad()
def measure_stage_costs(model: LlavaForConditionalGeneration, tok: PreTrainedTokenizerFast,
                        cfg: VlmConfig, repeats: int = 15) -> StageCosts:
    """Measure every stage on this process's torch threads (set them before calling)."""
    split = data.digit_splits(cfg.data)["test"]
    images = data.render(split.images[:max(ENCODER_BATCHES)], cfg.vision.image_size_px, cfg.data)
    pixels = pixel_values(images)
    encoder = {b: median_ms(lambda b=b: encode_images(model, pixels[:b]), repeats)
               for b in ENCODER_BATCHES}
    prefill, tokens = {}, {}
    for n in PROMPT_IMAGES:
        embeds = _prompt_embeds(model, tok, cfg, n)
        tokens[n] = int(embeds.shape[1])
        prefill[n] = median_ms(lambda e=embeds: _prefill(model, e), repeats)
    batched = {}
    for b in PREFILL_BATCHES:
        embeds = _prompt_embeds(model, tok, cfg, 4, b)
        batched[b] = median_ms(lambda e=embeds: _prefill(model, e), repeats)
    decode = {b: _decode_ms(model, tok, cfg, b, repeats) for b in DECODE_BATCHES}
    share = {n: encoder[n] / (encoder[n] + prefill[n]) for n in PROMPT_IMAGES
             if n in encoder}
    return StageCosts(encoder, prefill, tokens, batched, decode, share, torch.get_num_threads())
