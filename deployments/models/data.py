"""Deterministic datasets built from scikit-learn's bundled handwritten digits (no download).

`sklearn.datasets.load_digits` ships 1797 8x8 grayscale digits (values 0..16). We split them once,
stratified by digit, into train/val/test (60/20/20, seed 0), then *harden* every image so that
model size matters (a linear model must not reach ~99%):

1. upsample 8x8 -> 16x16 (bilinear), intensities to [0, 1], bright ink on a dark background;
2. a random affine warp (rotation, scale, shear, shift) with a seeded generator;
3. an occluding rectangle (with some probability), Gaussian pixel noise and a few "clutter" dots;
4. quantize to uint8, so the PNG wire form round-trips exactly.

Training draws fresh hardened views every epoch (generator seeded by (seed, epoch)); val and test
hold `views` fixed hardened copies of every source image (so test accuracy has a finer grain).
The multimodal views of the fusion family (`multimodal_views`) are derived from the same pixel
content, never from the label.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray

SPLITS = ("train", "val", "test")
IMAGE_SIZE = 16

# Tasks answered from one digit image: name -> number of classes.
TASK_CLASSES: dict[str, int] = {"digits": 10, "parity": 2, "loops": 2}
LOOP_DIGITS = frozenset({0, 6, 8, 9})
# The name of each class index of a task (answers carry it beside the index).
TASK_LABEL_NAMES: dict[str, tuple[str, ...]] = {
    "digits": tuple(str(d) for d in range(10)), "parity": ("even", "odd"),
    "loops": ("no_loop", "has_loop")}


class DigitLabelNames:
    """The digits families' `ServableModel.label_names`."""

    def label_names(self, task: str) -> tuple[str, ...] | None:
        return TASK_LABEL_NAMES.get(task)


@dataclass(frozen=True)
class DataConfig:
    """Everything that decides the data; part of every family's training-config hash."""

    seed: int = 0
    val_frac: float = 0.2
    test_frac: float = 0.2
    val_views: int = 2
    test_views: int = 3
    max_rotate_deg: float = 15.0
    scale_range: tuple[float, float] = (0.8, 1.15)
    max_shear: float = 0.25
    max_shift_px: float = 2.0
    occlusion_prob: float = 0.5
    occlusion_px: tuple[int, int] = (3, 6)
    noise_std: float = 0.12
    clutter_dots: int = 3

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@lru_cache(maxsize=1)
def _raw_digits() -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    from sklearn.datasets import load_digits  # lazy: importing sklearn takes seconds

    bunch = load_digits()
    images = (bunch.images / 16.0).astype(np.float32)
    labels = bunch.target.astype(np.int64)
    images.setflags(write=False)  # cached: shared read-only
    labels.setflags(write=False)
    return images, labels


def split_indices(cfg: DataConfig) -> dict[str, NDArray[np.int64]]:
    """Stratified, seeded source-image indices of each split (sorted, disjoint)."""
    from sklearn.model_selection import train_test_split

    _, labels = _raw_digits()
    idx = np.arange(len(labels))
    rest, test = train_test_split(idx, test_size=cfg.test_frac, stratify=labels,
                                  random_state=cfg.seed)
    val_size = cfg.val_frac / (1.0 - cfg.test_frac)
    train, val = train_test_split(rest, test_size=val_size, stratify=labels[rest],
                                  random_state=cfg.seed)
    return {"train": np.sort(train), "val": np.sort(val), "test": np.sort(test)}


def task_labels(task: str, digits: torch.Tensor) -> torch.Tensor:
    """Labels of `task` for digit labels `digits`."""
    if task == "digits":
        return digits
    if task == "parity":
        return digits % 2
    if task == "loops":
        loops = torch.tensor(sorted(LOOP_DIGITS), dtype=digits.dtype)
        return torch.isin(digits, loops).to(digits.dtype)
    raise KeyError(task)


def harden(images8: torch.Tensor, gen: torch.Generator, cfg: DataConfig) -> torch.Tensor:
    """Hardened uint8 [N, 16, 16] views of float [N, 8, 8] images in [0, 1]."""
    n = images8.shape[0]
    x = F.interpolate(images8[:, None], size=(IMAGE_SIZE, IMAGE_SIZE), mode="bilinear",
                      align_corners=False)

    def uni(lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(n, generator=gen)

    angle = uni(-cfg.max_rotate_deg, cfg.max_rotate_deg) * math.pi / 180.0
    scale = uni(*cfg.scale_range)
    shear = uni(-cfg.max_shear, cfg.max_shear)
    shift = (torch.rand(n, 2, generator=gen) * 2 - 1) * cfg.max_shift_px * 2.0 / IMAGE_SIZE
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin + shear, shift[:, 0]], 1),
                         torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)[:, 0]

    lo, hi = cfg.occlusion_px
    occlude = torch.rand(n, generator=gen) < cfg.occlusion_prob
    size = torch.randint(lo, hi + 1, (n, 2), generator=gen)
    corner = (torch.rand(n, 2, generator=gen) * (IMAGE_SIZE - size + 1)).long()
    rows = torch.arange(IMAGE_SIZE)
    in_r = (rows[None] >= corner[:, :1]) & (rows[None] < (corner[:, :1] + size[:, :1]))
    in_c = (rows[None] >= corner[:, 1:]) & (rows[None] < (corner[:, 1:] + size[:, 1:]))
    mask = in_r[:, :, None] & in_c[:, None, :] & occlude[:, None, None]
    x = x.masked_fill(mask, 0.0)

    x = x + cfg.noise_std * torch.randn(x.shape, generator=gen)
    dots = torch.randint(0, IMAGE_SIZE * IMAGE_SIZE, (n, cfg.clutter_dots), generator=gen)
    flat = x.reshape(n, -1)
    flat.scatter_(1, dots, torch.rand(n, cfg.clutter_dots, generator=gen) * 0.5 + 0.5)
    x = flat.reshape(n, IMAGE_SIZE, IMAGE_SIZE).clamp(0.0, 1.0)
    return (x * 255.0).round().to(torch.uint8)


def _generator(cfg: DataConfig, salt: int) -> torch.Generator:
    return torch.Generator().manual_seed(cfg.seed * 1_000_003 + salt)


def source_split(split: str, cfg: DataConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Clean float [N, 8, 8] source images and digit labels of `split`."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    images, labels = _raw_digits()
    idx = split_indices(cfg)[split]
    return torch.from_numpy(images[idx]), torch.from_numpy(labels[idx])


def _views(split: str, cfg: DataConfig, epoch: int) -> int:
    return {"train": 1, "val": cfg.val_views, "test": cfg.test_views}[split] if epoch < 0 else 1


def image_split(split: str, cfg: DataConfig, epoch: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """Hardened uint8 [M, 16, 16] images and digit labels.

    val/test (epoch -1): `views` fixed copies per source image, grouped view-major.
    train: pass `epoch` >= 0 for that epoch's fresh views (one per source image).
    """
    src, labels = source_split(split, cfg)
    views = _views(split, cfg, epoch)
    salt = {"train": 1000 + max(epoch, 0), "val": 1, "test": 2}[split]
    gen = _generator(cfg, salt)
    images = torch.cat([harden(src, gen, cfg) for _ in range(views)])
    return images, labels.repeat(views)


def to_float(images: torch.Tensor) -> torch.Tensor:
    """uint8 images -> float in [0, 1] with a channel axis ([..., 1, H, W])."""
    return images.float().div(255.0).unsqueeze(-3)
