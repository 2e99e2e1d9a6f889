"""Multimodal late-fusion classifier on the cluttered scenes ("scenefusion"): one encoder per
modality, as MOSEL's audio-visual models have, whose costs differ several-fold.

One item: a scene of `scenes.py` (a small target digit among fragments of others), and two other
views of the same target digit (its source digit, mildly augmented as `multimodal.py` does):
- "image": the scene read at 64 px by a timm ResNet (the dearest encoder by far);
- "audio": the digit sonified, 512 samples: column c of the 16x16 view plays during samples
  32c..32c+31, row r as a sine of its own frequency (phase restarting with every column) with
  the pixel's ink as amplitude, plus noise;
  encoded by a per-column learned filterbank (conv stride 32) and two small convolutions;
- "text": `multimodal.describe`'s words (ink per quadrant, centre, width; some flipped), a mean of
  word embeddings (the cheapest).
Each encoder ends in its own 10-way logits; a subset's logits are the sum of its modalities' (a
product of experts) plus a bias per subset.
Every modality subset is a variant, "scenefusion/<m1>+<m2>..." in the order image, audio, text;
omitting the image saves most of the cost. The sizes follow the shape rule (`python -m bench
family-shapes --trained scenefusion`): the dearest single-modality variant >= 3x the cheapest.

Training (deterministic, fresh scenes every epoch): each batch's encoders run once and the loss
is the mean over all seven subsets, so every encoder learns alone (its singleton) and in every
combination on every step. Task: "digits".

Wire format (`decode`): every request carries all three modalities (variants choose which to use):
{"image": base64 PNG (or any PIL-readable) scene, any size (resized to 64x64 as training did),
"audio": list of exactly 512 finite numbers, "text": string of 1..16 words (unknown -> <unk>)}.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import timm
import torch
import torch.nn.functional as F
from torch import nn

from deployments.models import training as T
from deployments.models.base import Example
from deployments.models.data import IMAGE_SIZE, harden, source_split
from deployments.models.fusion import SUBSETS, FusionServable
from deployments.models.input_decoding import check_task, encode_image
from deployments.models.multimodal import (
    AUDIO_LEN,
    MODALITIES,
    PAD,
    VOCAB,
    MultimodalConfig,
    describe,
    tokenize,
)
from deployments.models.scenes import SceneConfig, at_size, render_with_targets

CODE_VERSION = 1
FAMILY = "scenefusion"
TASKS = ("digits",)
COLUMN_SAMPLES = AUDIO_LEN // IMAGE_SIZE  # 32 samples per column of the 16x16 view


@dataclass(frozen=True)
class SceneFusionConfig:
    scenes: SceneConfig = field(default_factory=SceneConfig)
    views: MultimodalConfig = field(default_factory=MultimodalConfig)
    image_arch: str = "resnet18"
    image_side: int = 64
    audio_noise: float = 0.5
    audio_channels: int = 48
    feature_dim: int = 128
    train_scenes: int = 3000
    epochs: int = 2
    batch_size: int = 16
    lr: float = 2e-3
    seed: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"code_version": CODE_VERSION, **asdict(self)}


@dataclass(frozen=True)
class Items:
    """N items: uint8 scenes [N, S, S], float audio [N, 512], text strings, digit labels."""

    image: torch.Tensor
    audio: torch.Tensor
    text: tuple[str, ...]
    labels: torch.Tensor


def sonify(views: torch.Tensor, gen: torch.Generator, noise: float) -> torch.Tensor:
    """float audio [N, 512] of uint8 views [N, 16, 16] (see the module docstring)."""
    ink = views.float().div(255.0)  # [N, rows, columns]
    t = torch.arange(AUDIO_LEN, dtype=torch.float32) % COLUMN_SAMPLES  # each column starts anew
    freqs = (torch.arange(IMAGE_SIZE, dtype=torch.float32) + 1.0) / 40.0  # cycles per sample
    basis = torch.sin(2.0 * math.pi * freqs[:, None] * t[None, :] + math.pi / 4)  # [rows, 512]
    amplitude = ink.repeat_interleave(COLUMN_SAMPLES, dim=2)  # [N, rows, 512]
    wave = (amplitude * basis).sum(dim=1) / 4.0
    return wave + noise * torch.randn(wave.shape, generator=gen)


def items(split: str, cfg: SceneFusionConfig, count: int, seed: int) -> Items:
    """`count` items of `split`, deterministic in (cfg, split, count, seed)."""
    scenes, labels, targets = render_with_targets(split, cfg.scenes, count, seed)
    gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + seed * 7 + len(split))
    views = harden(source_split(split, cfg.scenes.split)[0][targets], gen, cfg.views.view)
    return Items(image=scenes, audio=sonify(views, gen, cfg.audio_noise),
                 text=tuple(describe(v, gen, cfg.views) for v in views), labels=labels)


@lru_cache(maxsize=4)
def held_out(split: str, cfg: SceneFusionConfig) -> Items:
    """The fixed val or test items (cached: treat as read-only)."""
    if split not in ("val", "test"):
        raise ValueError(f"split must be 'val' or 'test', got {split!r}")
    return items(split, cfg, cfg.scenes.val_scenes if split == "val" else cfg.scenes.test_scenes,
                 seed=0)


def text_ids(texts: list[str] | tuple[str, ...]) -> torch.Tensor:
    ids = [tokenize(t) for t in texts]
    width = max(len(i) for i in ids)
    return torch.tensor([i + [PAD] * (width - len(i)) for i in ids], dtype=torch.long)


def tensors(batch: Items, cfg: SceneFusionConfig) -> dict[str, torch.Tensor]:
    return {"image": at_size(batch.image, cfg.image_side), "audio": batch.audio,
            "text": text_ids(batch.text)}


class SceneFusionNet(nn.Module):
    def __init__(self, cfg: SceneFusionConfig) -> None:
        super().__init__()
        d, c = cfg.feature_dim, cfg.audio_channels
        self.image = timm.create_model(cfg.image_arch, pretrained=False, num_classes=10,
                                       in_chans=1)
        self.audio = nn.Sequential(
            nn.Conv1d(1, c, COLUMN_SAMPLES, stride=COLUMN_SAMPLES), nn.GELU(),
            nn.Conv1d(c, 64, 3, padding=1), nn.GELU(), nn.Conv1d(64, 64, 3, padding=1),
            nn.GELU(), nn.Flatten(), nn.Linear(64 * IMAGE_SIZE, d), nn.GELU(), nn.Linear(d, 10))
        self.words = nn.Embedding(len(VOCAB), d, padding_idx=PAD)
        self.text_head = nn.Sequential(nn.GELU(), nn.Linear(d, 10))
        self.subset_bias = nn.Parameter(torch.zeros(len(SUBSETS), 10))

    def encode(self, batch: dict[str, torch.Tensor], modality: str) -> torch.Tensor:
        if modality == "image":
            return self.image(batch["image"])
        if modality == "audio":
            return self.audio(batch["audio"][:, None])
        ids = batch["text"]
        present = (ids != PAD).float().unsqueeze(-1)
        return self.text_head((self.words(ids) * present).sum(1) / present.sum(1).clamp(min=1.0))

    def fuse(self, logits: dict[str, torch.Tensor], subset: tuple[str, ...]) -> torch.Tensor:
        """The subset's logits: the sum of its modalities' (a product of experts) and a bias."""
        fused = sum(logits[m] for m in subset)
        assert isinstance(fused, torch.Tensor)
        return fused + self.subset_bias[SUBSETS.index(subset)]

    def forward(self, batch: dict[str, torch.Tensor], subset: tuple[str, ...]) -> torch.Tensor:
        return self.fuse({m: self.encode(batch, m) for m in subset}, subset)


def build(cfg: SceneFusionConfig) -> SceneFusionNet:
    with T.deterministic(cfg.seed):
        return SceneFusionNet(cfg)


def train(cfg: SceneFusionConfig) -> tuple[SceneFusionNet, dict[str, dict[str, float]]]:
    model = build(cfg)
    clock = T.Stopwatch(FAMILY)
    with T.deterministic(cfg.seed):
        gen = torch.Generator().manual_seed(cfg.seed)
        n = cfg.train_scenes
        opt, sched = T.optimizer(list(model.parameters()), cfg.lr,
                                 cfg.epochs * -(-n // cfg.batch_size))
        model.train()
        for epoch in range(cfg.epochs):
            data = items("train", cfg, n, seed=1 + epoch)
            batch, labels = tensors(data, cfg), data.labels
            for idx in T.batches(n, cfg.batch_size, gen):
                part = {k: v[idx] for k, v in batch.items()}
                feats = {m: model.encode(part, m) for m in MODALITIES}
                loss = sum(F.cross_entropy(model.fuse(feats, s), labels[idx], label_smoothing=0.1)
                           for s in SUBSETS) / len(SUBSETS)
                T.step(loss, opt, sched)
        model.eval()
        clock.lap("training")
    return model, evaluate(model, cfg, "test")


@torch.no_grad()
def evaluate(model: SceneFusionNet, cfg: SceneFusionConfig,
             split: str) -> dict[str, dict[str, float]]:
    data = held_out(split, cfg)
    batch = tensors(data, cfg)
    feats = {m: torch.cat([model.encode({k: v[i:i + 256] for k, v in batch.items()}, m)
                           for i in range(0, len(data.labels), 256)]) for m in MODALITIES}
    return {"digits": {variant_name(s): float(
        (model.fuse(feats, s).argmax(-1) == data.labels).float().mean()) for s in SUBSETS}}


def variant_name(subset: tuple[str, ...]) -> str:
    return f"{FAMILY}/" + "+".join(subset)


class SceneFusionServable(FusionServable):
    """`FusionServable` over a trained `SceneFusionNet`: the scene read at `image_side`, held-out
    scene items as examples."""

    name = FAMILY

    def image_size(self) -> tuple[int, int]:
        return self.cfg.image_side, self.cfg.image_side

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        check_task(task, TASKS)
        data = held_out(split, self.cfg)
        n = len(data.labels) if limit is None else min(limit, len(data.labels))
        return [Example(inputs={"image": encode_image(data.image[i]),
                                "audio": [float(v) for v in data.audio[i].tolist()],
                                "text": data.text[i]},
                        label=int(data.labels[i]), task=task) for i in range(n)]
