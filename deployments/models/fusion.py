"""Multimodal early-fusion classifier ("fusion"), TVLT-style: one transformer over all tokens.

Each modality becomes tokens with its own small embedding plus a learned position and modality
embedding; a class token and the concatenation of the chosen modalities' tokens go through a
shared transformer (timm `Block`s, embed 64, depth 3, 4 heads), and the class token is classified.
Omitting a modality shortens the sequence, so every modality subset is a cheaper variant:

- "image": top half of the digit, 8 high x 16 wide, conv3x3 stem then 2x4 patches -> 16 tokens;
- "audio": 512 samples, frames of 16 samples -> 32 tokens (the most expensive modality);
- "text": one token per word (at most 16; the generated descriptions have 11).

Trained with modality dropout: every batch's loss is that of all three modalities plus that of
one uniformly random proper subset, so all 7 subsets work and the full input, which serving uses
whenever load allows, is trained on every step. (One uniform subset per batch, the first recipe,
left the full-input accuracy within a few points of the image alone and on another CPU's
floating-point rounding below it.) Variants "fusion/<m1>+<m2>..." in the order image, audio,
text. Task: "digits" (10 classes).
See `multimodal.py` for how the three partial views are derived from the pixels (no label leak).

Wire format (`decode`): every request carries all three modalities (variants choose which to use):
{"image": base64 PNG (or any PIL-readable) image of the top half, any size, resized to 16 wide x 8
high, grayscale or RGB, bright ink on dark; "audio": list of exactly 512 finite numbers;
"text": string of 1..16 words, unknown words map to <unk>}.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from timm.models.vision_transformer import Block
from torch import nn

from deployments.models import training as T
from deployments.models.base import Example, Prediction, ServableModel
from deployments.models.data import IMAGE_SIZE, DigitLabelNames
from deployments.models.input_decoding import (
    check_fields,
    check_task,
    decode_floats,
    decode_image,
    decode_text,
    encode_image,
)
from deployments.models.multimodal import (
    AUDIO_FRAME,
    AUDIO_LEN,
    HALF,
    MODALITIES,
    PAD,
    TEXT_MAX_WORDS,
    VOCAB,
    MultimodalConfig,
    multimodal_split,
    tokenize,
)
from policies.types import Variant

log = logging.getLogger(__name__)
CODE_VERSION = 2
TASKS = ("digits",)
IMAGE_PATCH = (2, 4)  # (rows, columns): 4 x 4 = 16 image tokens
AUDIO_TOKEN = 2 * AUDIO_FRAME  # samples per audio token: 32 tokens
SUBSETS: tuple[tuple[str, ...], ...] = tuple(
    s for k in range(1, len(MODALITIES) + 1) for s in itertools.combinations(MODALITIES, k))
FULL = SUBSETS[-1]
PARTIAL = SUBSETS[:-1]


@dataclass(frozen=True)
class FusionConfig:
    data: MultimodalConfig = field(default_factory=MultimodalConfig)
    embed_dim: int = 64
    depth: int = 3
    heads: int = 4
    mlp_ratio: float = 2.0
    stem_channels: int = 16
    epochs: int = 20  # two subsets per step: the same compute as 40 epochs of one
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"code_version": CODE_VERSION, **asdict(self)}


def variant_name(subset: tuple[str, ...]) -> str:
    return "fusion/" + "+".join(subset)


class FusionNet(nn.Module):
    def __init__(self, cfg: FusionConfig) -> None:
        super().__init__()
        d = cfg.embed_dim
        n_img = (HALF // IMAGE_PATCH[0]) * (IMAGE_SIZE // IMAGE_PATCH[1])
        self.image_embed = nn.Sequential(
            nn.Conv2d(1, cfg.stem_channels, 3, padding=1), nn.GELU(),
            nn.Conv2d(cfg.stem_channels, d, IMAGE_PATCH, stride=IMAGE_PATCH))
        self.audio_embed = nn.Linear(AUDIO_TOKEN, d)
        self.text_embed = nn.Embedding(len(VOCAB), d, padding_idx=PAD)
        self.pos = nn.ParameterDict({
            "image": nn.Parameter(0.02 * torch.randn(1, n_img, d)),
            "audio": nn.Parameter(0.02 * torch.randn(1, AUDIO_LEN // AUDIO_TOKEN, d)),
            "text": nn.Parameter(0.02 * torch.randn(1, TEXT_MAX_WORDS, d))})
        self.kind = nn.Parameter(0.02 * torch.randn(len(MODALITIES), d))
        self.cls = nn.Parameter(0.02 * torch.randn(1, 1, d))
        self.blocks = nn.ModuleList(Block(d, cfg.heads, cfg.mlp_ratio, qkv_bias=True)
                                    for _ in range(cfg.depth))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def tokens(self, batch: dict[str, torch.Tensor],
               subset: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The token sequence [B, N, D] and a key mask [B, 1, 1, N] (True = attend) or None."""
        parts, masks = [], []
        for m in subset:
            if m == "image":
                tok = self.image_embed(batch["image"]).flatten(2).transpose(1, 2)
            elif m == "audio":
                tok = self.audio_embed(batch["audio"].view(batch["audio"].shape[0], -1,
                                                           AUDIO_TOKEN))
            else:
                ids = batch["text"]
                tok = self.text_embed(ids)
                masks.append((len(parts), ids != PAD))
            n = tok.shape[1]
            parts.append(tok + self.pos[m][:, :n] + self.kind[MODALITIES.index(m)])
        x = torch.cat([self.cls.expand(parts[0].shape[0], -1, -1), *parts], dim=1)
        if not masks or all(bool(mk.all()) for _, mk in masks):
            return x, None
        keep = [torch.ones(x.shape[0], 1, dtype=torch.bool, device=x.device)]
        for i, part in enumerate(parts):
            text_mask = next((mk for j, mk in masks if j == i), None)
            keep.append(text_mask if text_mask is not None else torch.ones(
                part.shape[:2], dtype=torch.bool, device=x.device))
        return x, torch.cat(keep, dim=1)[:, None, None, :]

    def forward(self, batch: dict[str, torch.Tensor], subset: tuple[str, ...]) -> torch.Tensor:
        x, mask = self.tokens(batch, subset)
        for blk in self.blocks:
            x = blk(x, attn_mask=mask)
        return self.head(self.norm(x[:, 0]))


def build(cfg: FusionConfig) -> FusionNet:
    with T.deterministic(cfg.seed):
        return FusionNet(cfg)


def tensors(split: str, cfg: FusionConfig, epoch: int = -1) -> tuple[dict[str, torch.Tensor],
                                                                       torch.Tensor]:
    """Model-ready tensors of a split (image [N,1,8,16], audio [N,512], text ids [N,L])."""
    mm = multimodal_split(split, cfg.data, epoch)
    ids = [tokenize(t) for t in mm.text]
    width = max(len(i) for i in ids)
    text = torch.tensor([i + [PAD] * (width - len(i)) for i in ids], dtype=torch.long)
    return {"image": mm.image.float().div(255.0)[:, None], "audio": mm.audio,
            "text": text}, mm.labels


def train(cfg: FusionConfig) -> tuple[FusionNet, dict[str, dict[str, float]]]:
    model = build(cfg)
    clock = T.Stopwatch("fusion")
    with T.deterministic(cfg.seed):
        gen = torch.Generator().manual_seed(cfg.seed)
        n = len(tensors("train", cfg, 0)[1])
        opt, sched = T.optimizer(list(model.parameters()), cfg.lr,
                                 cfg.epochs * -(-n // cfg.batch_size))
        model.train()
        for epoch in range(cfg.epochs):
            batch, labels = tensors("train", cfg, epoch)
            for idx in T.batches(n, cfg.batch_size, gen):
                subset = PARTIAL[int(torch.randint(0, len(PARTIAL), (1,), generator=gen))]
                items = {k: v[idx] for k, v in batch.items()}
                loss = sum(F.cross_entropy(model(items, s), labels[idx], label_smoothing=0.1)
                           for s in (FULL, subset))
                T.step(loss, opt, sched)
            log.info("fusion epoch %d/%d loss %.3f", epoch + 1, cfg.epochs, float(loss.detach()))
        model.eval()
        clock.lap("training")
    return model, evaluate(model, cfg, "test")


@torch.no_grad()
def evaluate(model: FusionNet, cfg: FusionConfig, split: str) -> dict[str, dict[str, float]]:
    batch, labels = tensors(split, cfg)
    return {"digits": {variant_name(s): T.accuracy(
        lambda idx, s=s: model({k: v[idx] for k, v in batch.items()}, s),
        torch.arange(len(labels)), labels) for s in SUBSETS}}


class FusionServable(DigitLabelNames, ServableModel):
    """`ServableModel` over a trained `FusionNet`; one variant per non-empty modality subset,
    "<name>/<m1>+<m2>...". A subclass serves another net with the same `forward(batch, subset)`
    and wire fields (`scene_fusion.py`): its name, image size and held-out items."""

    name = "fusion"

    def __init__(self, model: nn.Module, cfg: Any) -> None:
        self.model = model.eval()
        self.cfg = cfg
        self._variants = tuple(Variant(name=f"{self.name}/" + "+".join(s), model=self.name,
                                       modalities=frozenset(s)) for s in SUBSETS)

    def image_size(self) -> tuple[int, int]:
        """(height, width) a request's image is resized to."""
        return HALF, IMAGE_SIZE

    def variants(self) -> tuple[Variant, ...]:
        return self._variants

    def tasks(self) -> tuple[str, ...]:
        return TASKS

    def modalities(self) -> tuple[str, ...]:
        return MODALITIES

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, torch.Tensor]:
        check_task(task, TASKS)
        fields = check_fields(inputs, required=MODALITIES, allowed=MODALITIES)
        ids = tokenize(decode_text(fields["text"], "text", TEXT_MAX_WORDS))
        return {"image": decode_image(fields["image"], "image", *self.image_size()),
                "audio": decode_floats(fields["audio"], "audio", AUDIO_LEN),
                "text": torch.tensor(ids, dtype=torch.long)}

    def run(self, variant: Variant, task: str,
            items: list[dict[str, torch.Tensor]]) -> list[Prediction]:
        if variant not in self._variants:
            raise ValueError(f"unknown variant {variant.name!r} for family {self.name}")
        check_task(task, TASKS)
        if not items:
            return []
        subset = tuple(m for m in MODALITIES if m in (variant.modalities or set(MODALITIES)))
        device = next(self.model.parameters()).device
        batch: dict[str, torch.Tensor] = {}
        if "image" in subset:
            batch["image"] = torch.stack([it["image"] for it in items]).to(device)
        if "audio" in subset:
            batch["audio"] = torch.stack([it["audio"] for it in items]).to(device)
        if "text" in subset:
            width = max(len(it["text"]) for it in items)
            batch["text"] = torch.stack([F.pad(it["text"], (0, width - len(it["text"])),
                                               value=PAD) for it in items]).to(device)
        with torch.inference_mode():
            probs = self.model(batch, subset).softmax(-1)
        conf, label = probs.max(-1)
        return [Prediction(label=int(lbl), confidence=float(c))
                for lbl, c in zip(label.tolist(), conf.tolist(), strict=True)]

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        if split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test', got {split!r}")
        check_task(task, TASKS)
        mm = multimodal_split(split, self.cfg.data)
        n = len(mm.labels) if limit is None else min(limit, len(mm.labels))
        return [Example(inputs={"image": encode_image(mm.image[i]),
                                "audio": [float(v) for v in mm.audio[i].tolist()],
                                "text": mm.text[i]},
                        label=int(mm.labels[i]), task=task) for i in range(n)]

    def to(self, device: torch.device) -> FusionServable:
        self.model.to(device)
        return self
