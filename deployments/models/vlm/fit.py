"""Training the VLM, deterministically, in two stages (see `TrainSpec`).

(A) The vision tower learns the digits as a classifier (a linear head on its mean patch
feature; the head is discarded). (B) The tower is frozen and its features cached; projector
and decoder learn the three tasks: every step an arithmetic batch, every `image_every`-th step
also a batch of sequences (one image count per step, so no padding) and one of single digits.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import LlavaForConditionalGeneration, PreTrainedTokenizerFast

from deployments.models import training
from deployments.models.vlm import data
from deployments.models.vlm.config import VlmConfig
from deployments.models.vlm.model import (
    build_model,
    init_number_embeddings,
    pixel_values,
    tower_features,
)
from deployments.models.vlm.prompts import IGNORE_INDEX, training_batch
from deployments.models.vlm.tokenizer import number_word

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FitResult:
    model: LlavaForConditionalGeneration
    tower_s: float
    decoder_s: float
    tower_test_accuracy: float


def lm_loss(model: LlavaForConditionalGeneration, ids: torch.Tensor, mask: torch.Tensor,
            labels: torch.Tensor, features: torch.Tensor | None = None) -> torch.Tensor:
    """Next-token cross entropy; `features` [num_images, tokens, vision hidden] (tower
    output) fill the image positions in order, through the projector."""
    embeds = model.get_input_embeddings()(ids)
    if features is not None:
        projected = model.model.multi_modal_projector(features).reshape(-1, embeds.shape[-1])
        slots = (ids == model.config.image_token_id).unsqueeze(-1).expand_as(embeds)
        embeds = embeds.masked_scatter(slots, projected.to(embeds.dtype))
    out = model.model.language_model(inputs_embeds=embeds, attention_mask=mask)
    logits = model.lm_head(out.last_hidden_state[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1),
                           ignore_index=IGNORE_INDEX)


def _classify(model: LlavaForConditionalGeneration, head: nn.Linear,
              pixels: torch.Tensor) -> torch.Tensor:
    return head(tower_features(model, pixels).mean(1))


def _train_tower(model: LlavaForConditionalGeneration, cfg: VlmConfig,
                 splits: dict[str, data.DigitSplit]) -> float:
    """Stage A; returns the classifier's test accuracy (a diagnostic, not a selection)."""
    spec, train = cfg.train, splits["train"]
    tower = model.model.vision_tower
    head = nn.Linear(cfg.vision.hidden_size, 10)
    n = len(train.labels)
    steps = spec.tower_epochs * -(-n // spec.tower_batch)
    opt, sched = training.optimizer([*tower.parameters(), *head.parameters()], spec.tower_lr,
                                    steps, spec.tower_weight_decay)
    gen = torch.Generator().manual_seed(spec.seed * 1_000_003 + 1)
    pixels = pixel_values(data.render(train.images, cfg.vision.image_size_px, cfg.data))
    for epoch in range(spec.tower_epochs):
        for idx in training.batches(n, spec.tower_batch, gen):
            loss = F.cross_entropy(_classify(model, head, pixels[idx]), train.labels[idx])
            training.step(loss, opt, sched)
        log.info("vlm tower epoch %d loss %.4f", epoch, float(loss.detach()))
    test = pixel_values(data.render(splits["test"].images, cfg.vision.image_size_px, cfg.data))
    with torch.no_grad():
        hits = _classify(model, head, test).argmax(-1) == splits["test"].labels
    return float(hits.float().mean())


@torch.no_grad()
def cache_features(model: LlavaForConditionalGeneration, cfg: VlmConfig,
                   train: data.DigitSplit) -> torch.Tensor:
    """Tower features [views, N, tokens, vision hidden]: view 0 clean, the others augmented."""
    views = []
    for v in range(cfg.train.feature_views):
        gen = torch.Generator().manual_seed(cfg.train.seed * 1_000_003 + 500 + v) if v else None
        images = data.render(train.images, cfg.vision.image_size_px, cfg.data, gen)
        views.append(torch.cat([tower_features(model, pixel_values(images[i:i + 128]))
                                for i in range(0, len(images), 128)]))
    return torch.stack(views)


def _rows(examples: list[data.Example]) -> list[tuple[str, int, str]]:
    return [(e.text, len(e.image_ids), e.answer) for e in examples]


def _image_loss(model: LlavaForConditionalGeneration, tok: PreTrainedTokenizerFast,
                cfg: VlmConfig, feats: torch.Tensor, train: data.DigitSplit,
                gen: torch.Generator) -> torch.Tensor:
    spec, tpi = cfg.train, cfg.vision.tokens_per_image
    n_img = int(torch.randint(1, cfg.data.max_images + 1, (1,), generator=gen))
    seq = data.sequence_examples(train, spec.sequence_batch, n_img, gen, num_images=n_img)
    views = torch.randint(feats.shape[0], (len(seq),), generator=gen).tolist()
    seq_feats = torch.cat([feats[v, list(e.image_ids)] for v, e in zip(views, seq, strict=True)])
    loss = lm_loss(model, *training_batch(tok, _rows(seq), tpi), seq_feats)
    pick = torch.randint(len(train.labels), (spec.digit_batch,), generator=gen)
    digits = [data.Example("digit", "which digit is this?", number_word(int(train.labels[i])),
                           (i,)) for i in pick.tolist()]
    digit_views = torch.randint(feats.shape[0], (len(digits),), generator=gen)
    return loss + lm_loss(model, *training_batch(tok, _rows(digits), tpi),
                          feats[digit_views, pick])


def _arithmetic_batch(tok: PreTrainedTokenizerFast, cfg: VlmConfig, facts: list[data.Example],
                      gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    pick = torch.randint(len(facts), (cfg.train.arithmetic_batch,), generator=gen).tolist()
    return training_batch(tok, _rows([facts[i] for i in pick]), cfg.vision.tokens_per_image)


def _train_decoder(model: LlavaForConditionalGeneration, tok: PreTrainedTokenizerFast,
                   cfg: VlmConfig, train: data.DigitSplit, facts: list[data.Example]) -> None:
    """Stage B: projector + decoder on cached tower features."""
    spec = cfg.train
    feats = cache_features(model, cfg, train)
    model.model.vision_tower.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt, sched = training.optimizer(params, spec.decoder_lr, spec.decoder_steps,
                                    spec.decoder_weight_decay)
    gen = torch.Generator().manual_seed(spec.seed * 1_000_003 + 2)
    for i in range(spec.decoder_steps):
        loss = lm_loss(model, *_arithmetic_batch(tok, cfg, facts, gen))
        if i % spec.image_every == 0:
            loss = loss + _image_loss(model, tok, cfg, feats, train, gen)
        training.step(loss, opt, sched)
        if i % 100 == 0 or i == spec.decoder_steps - 1:
            log.info("vlm decoder step %d loss %.4f", i, float(loss.detach()))
    model.model.vision_tower.requires_grad_(True)


def fit(cfg: VlmConfig, tok: PreTrainedTokenizerFast) -> FitResult:
    """Build and train the model (seeded, deterministic algorithms)."""
    splits = data.digit_splits(cfg.data)
    facts = data.arithmetic_facts(cfg.data)["train"]
    with training.deterministic(cfg.train.seed):
        model = build_model(cfg, tok)
        init_number_embeddings(model, tok, cfg.train.number_init, cfg.train.seed)
        model.train()
        start = time.perf_counter()
        tower_acc = _train_tower(model, cfg, splits)
        tower_s = time.perf_counter() - start
        log.info("vlm tower trained in %.1fs, classifier test accuracy %.4f", tower_s, tower_acc)
        _train_decoder(model, tok, cfg, splits["train"], facts)
        decoder_s = time.perf_counter() - start - tower_s
    model.eval()
    return FitResult(model, tower_s, decoder_s, tower_acc)
