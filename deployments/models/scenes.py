"""Cluttered digit scenes: the task of the model-selection ladder (`ladder.py`).

Each scene is a 96x96 greyscale canvas (uint8, bright ink on a dark background) holding one
target digit near its centre and fragments of other digits around it, under pixel noise:

- the target: a source digit of the split (scikit-learn's 8x8 digits, `data.py`'s stratified
  60/20/20 split) upsampled to `digit_px` (14-18 px) and shifted up to `jitter_px` from the centre;
- clutter: `clutter` (6-10) smaller fragments (6-10 px, 50-100% brightness) of other digits of
  the same split anywhere on the canvas, drawn first, the target over them (max blend);
- Gaussian noise (std 0.15), then clipped and quantised (the PNG wire form round-trips).

The label is the target's digit. What makes model size matter, as in production vision: a
variant that reads the scene at 32 px sees the target at ~5 px (its strokes blur into the
clutter), one at 96 px sees every pixel; and more capacity separates target from fragments
better. Scenes are a pure function of (config, split, seed): train draws fresh scenes per epoch,
val and test hold fixed ones from their own source digits (held out).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F
from numpy.typing import NDArray
from PIL import Image

from deployments.models.data import DataConfig, source_split

CANVAS = 96


@dataclass(frozen=True)
class SceneConfig:
    """Everything that decides the scenes; part of the ladder's training-config hash."""

    split: DataConfig = DataConfig()
    canvas: int = CANVAS
    digit_px: tuple[int, int] = (14, 18)
    jitter_px: int = 6
    clutter: tuple[int, int] = (6, 10)
    fragment_px: tuple[int, int] = (6, 10)
    noise_std: float = 0.15
    val_scenes: int = 600
    test_scenes: int = 1000

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _resized(src: torch.Tensor, sizes: range) -> dict[int, NDArray[np.float32]]:
    return {s: F.interpolate(src[:, None], size=(s, s), mode="bilinear",
                             align_corners=False)[:, 0].numpy() for s in sizes}


def render(split: str, cfg: SceneConfig, count: int, seed: int
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` uint8 scenes [count, canvas, canvas] and their digit labels, from the source
    digits of `split` only, deterministic in (cfg, split, count, seed)."""
    scenes, labels, _ = render_with_targets(split, cfg, count, seed)
    return scenes, labels


def render_with_targets(split: str, cfg: SceneConfig, count: int, seed: int
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`render`'s scenes and labels, and each scene's target: its index in `source_split(split)`
    (what other modalities of the same item are derived from)."""
    src, labels = source_split(split, cfg.split)
    lo = min(cfg.digit_px[0], cfg.fragment_px[0])
    hi = max(cfg.digit_px[1], cfg.fragment_px[1])
    table = _resized(src, range(lo, hi + 1))
    rng = np.random.default_rng([cfg.split.seed, seed, {"train": 0, "val": 1, "test": 2}[split]])
    c = cfg.canvas
    scenes = np.zeros((count, c, c), np.float32)
    targets = rng.integers(len(labels), size=count)
    for k in range(count):
        canvas = scenes[k]
        for _ in range(int(rng.integers(cfg.clutter[0], cfg.clutter[1] + 1))):
            j = int(rng.integers(len(labels)))
            s = int(rng.integers(cfg.fragment_px[0], cfg.fragment_px[1] + 1))
            y, x = rng.integers(0, c - s, 2)
            patch = canvas[y:y + s, x:x + s]
            np.maximum(patch, table[s][j] * rng.uniform(0.5, 1.0), out=patch)
        s = int(rng.integers(cfg.digit_px[0], cfg.digit_px[1] + 1))
        y, x = np.clip((c - s) // 2 + rng.integers(-cfg.jitter_px, cfg.jitter_px + 1, 2), 0, c - s)
        patch = canvas[y:y + s, x:x + s]
        np.maximum(patch, table[s][int(targets[k])], out=patch)
    scenes += rng.normal(0.0, cfg.noise_std, scenes.shape).astype(np.float32)
    pixels = np.clip(scenes, 0.0, 1.0) * 255.0
    index = torch.from_numpy(targets)
    return torch.from_numpy(np.round(pixels).astype(np.uint8)), labels[index], index


@lru_cache(maxsize=4)
def held_out(split: str, cfg: SceneConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed val or test scenes (cached: treat as read-only)."""
    if split not in ("val", "test"):
        raise ValueError(f"split must be 'val' or 'test', got {split!r}")
    return render(split, cfg, cfg.val_scenes if split == "val" else cfg.test_scenes, seed=0)


def at_size(images: torch.Tensor, side: int) -> torch.Tensor:
    """uint8 scenes [N, H, W] -> float [N, 1, side, side] in [0, 1], resized exactly as the
    serving path resizes a request's image (`input_decoding.decode_pixels`: PIL bilinear, which
    filters over the source pixels when it shrinks), so a variant trains on what it serves."""
    if images.shape[-1] != side:
        images = torch.stack([
            torch.from_numpy(np.array(Image.fromarray(img.numpy()).resize(
                (side, side), Image.Resampling.BILINEAR))) for img in images])
    return images.float().div(255.0).unsqueeze(1)
