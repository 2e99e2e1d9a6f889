"""Three partial modalities derived from one digit's pixels (the fusion family's data).

Every item starts from a mildly hardened 16x16 view of a digit (`data.harden` with
`MultimodalConfig.view`). From that view, never from the label:

- "image": the TOP half only (rows 0-7), a 16 wide x 8 high grayscale image plus pixel noise.
- "audio": a 512-sample waveform that sonifies the BOTTOM half's column ink profile: column c
  (0..15) owns samples [32c, 32c+32) of a carrier with period 8 samples whose amplitude is that
  column's mean ink; a random gain and Gaussian noise are added. The longest modality (64 tokens)
  but, being a 1-D profile of half the digit under noise, not the most informative.
- "text": a short description of coarse features, e.g.
  "top-left high top-right low bottom-left mid bottom-right high center empty wide": the mean ink
  of each quadrant as low/mid/high, whether the central 4x4 block holds ink, and whether the
  inked columns span wide or narrow. Some words are replaced at random ("mislabelled").

All randomness comes from seeded generators, so every split is identical across runs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import torch

from deployments.models.data import IMAGE_SIZE, DataConfig, harden, source_split

MODALITIES = ("image", "audio", "text")
HALF = IMAGE_SIZE // 2
AUDIO_LEN = 512
AUDIO_FRAME = 8
TEXT_MAX_WORDS = 16

QUADRANTS = ("top-left", "top-right", "bottom-left", "bottom-right")
LEVELS = ("low", "mid", "high")
VOCAB: tuple[str, ...] = ("<pad>", "<unk>", *QUADRANTS, *LEVELS, "center", "empty", "filled",
                          "wide", "narrow")
PAD, UNK = 0, 1


def _mild_view() -> DataConfig:
    return DataConfig(max_rotate_deg=10.0, max_shift_px=1.0, scale_range=(0.9, 1.1),
                      max_shear=0.15, occlusion_prob=0.0, noise_std=0.05, clutter_dots=0)


@dataclass(frozen=True)
class MultimodalConfig:
    """Everything that decides the fusion data (part of the fusion training-config hash)."""

    view: DataConfig = field(default_factory=_mild_view)
    image_noise: float = 0.2
    audio_noise: float = 0.3
    audio_gain: tuple[float, float] = (0.6, 1.4)
    text_flip_prob: float = 0.1
    level_edges: tuple[float, float] = (0.26, 0.33)
    center_edge: float = 0.55
    wide_columns: int = 10

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class MultimodalBatch:
    """Per-modality tensors of N items: uint8 image [N, 8, 16], float audio [N, 512],
    text strings, and digit labels."""

    image: torch.Tensor
    audio: torch.Tensor
    text: tuple[str, ...]
    labels: torch.Tensor


def _audio(view: torch.Tensor, gen: torch.Generator, cfg: MultimodalConfig) -> torch.Tensor:
    n = view.shape[0]
    profile = view[:, HALF:, :].float().div(255.0).mean(dim=1)  # [N, 16] column ink
    per_col = AUDIO_LEN // IMAGE_SIZE
    envelope = profile.repeat_interleave(per_col, dim=1)  # [N, 512]
    t = torch.arange(AUDIO_LEN, dtype=torch.float32)
    carrier = torch.sin(2.0 * math.pi * t / AUDIO_FRAME + math.pi / 4)
    lo, hi = cfg.audio_gain
    gain = lo + (hi - lo) * torch.rand(n, 1, generator=gen)
    wave = gain * envelope * carrier + cfg.audio_noise * torch.randn(n, AUDIO_LEN, generator=gen)
    return wave.to(torch.float32)


def _level(value: float, edges: tuple[float, float]) -> str:
    return LEVELS[0] if value < edges[0] else LEVELS[1] if value < edges[1] else LEVELS[2]


def describe(view: torch.Tensor, gen: torch.Generator, cfg: MultimodalConfig) -> str:
    """The text modality of one uint8 [16, 16] view (words flipped with `text_flip_prob`)."""
    x = view.float().div(255.0)
    quads = [x[:HALF, :HALF], x[:HALF, HALF:], x[HALF:, :HALF], x[HALF:, HALF:]]
    words: list[str] = []
    for name, quad in zip(QUADRANTS, quads, strict=True):
        level = _level(float(quad.mean()), cfg.level_edges)
        if float(torch.rand(1, generator=gen)) < cfg.text_flip_prob:
            level = LEVELS[int(torch.randint(0, len(LEVELS), (1,), generator=gen))]
        words += [name, level]
    c = IMAGE_SIZE // 2
    filled = float(x[c - 2:c + 2, c - 2:c + 2].mean()) > cfg.center_edge
    if float(torch.rand(1, generator=gen)) < cfg.text_flip_prob:
        filled = not filled
    words += ["center", "filled" if filled else "empty"]
    inked = int((x.max(dim=0).values > 0.5).sum())
    words.append("wide" if inked >= cfg.wide_columns else "narrow")
    return " ".join(words)


def multimodal_split(split: str, cfg: MultimodalConfig, epoch: int = -1) -> MultimodalBatch:
    """The fusion items of `split` (val/test: fixed views; train: `epoch` >= 0 gives fresh ones)."""
    src, labels = source_split(split, cfg.view)
    views = {"train": 1, "val": cfg.view.val_views, "test": cfg.view.test_views}[split]
    if epoch >= 0:
        views = 1
    salt = {"train": 5000 + max(epoch, 0), "val": 11, "test": 12}[split]
    gen = torch.Generator().manual_seed(cfg.view.seed * 1_000_003 + salt)
    full = torch.cat([harden(src, gen, cfg.view) for _ in range(views)])
    top = full[:, :HALF, :].float() + cfg.image_noise * 255.0 * torch.randn(
        full.shape[0], HALF, IMAGE_SIZE, generator=gen)
    image = top.clamp(0, 255).round().to(torch.uint8)
    audio = _audio(full, gen, cfg)
    text = tuple(describe(v, gen, cfg) for v in full)
    return MultimodalBatch(image=image, audio=audio, text=text, labels=labels.repeat(views))


def tokenize(text: str) -> list[int]:
    """Word ids of `text` (lower-cased, whitespace-split; unknown words -> <unk>)."""
    index = {w: i for i, w in enumerate(VOCAB)}
    return [index.get(w, UNK) for w in text.lower().split()]
