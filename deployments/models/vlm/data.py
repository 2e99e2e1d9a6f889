"""The VLM's data, made from scikit-learn's bundled digits (no download).

The 1797 8x8 digits are split once (stratified, seeded) into train and test source images; the
test images are never trained on. Images are rendered at the vision tower's resolution (bilinear
upscale of the 8x8 digit, bright ink on black, uint8 grey replicated to RGB by the processor);
training images get a fresh random affine view per use. Three tasks:

- `digit`: one image, "which digit is this?" -> "seven";
- `sequence`: 1..max_images images in order, "read the digits" -> "three one four";
- `arithmetic`: text only, "what is two plus three?" -> "five" (operands and answers within
  0..max_number; the facts themselves are split, so held-out facts were never seen).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

from deployments.models.vlm.config import DataSpec
from deployments.models.vlm.tokenizer import number_word

TASKS = ("digit", "sequence", "arithmetic")
SPLITS = ("train", "test")


@dataclass(frozen=True)
class Example:
    """One request and its expected answer; `image_ids` index the split's source images."""

    task: str
    text: str
    answer: str
    image_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class DigitSplit:
    """Source digits of one split: float [N, 8, 8] in [0, 1] and labels [N]."""

    images: torch.Tensor
    labels: torch.Tensor


def digit_splits(spec: DataSpec) -> dict[str, DigitSplit]:
    """Stratified, seeded train/test split of the source digits (disjoint, sorted indices)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    bunch = load_digits()
    images = torch.from_numpy((bunch.images / 16.0).astype(np.float32))
    labels = torch.from_numpy(bunch.target.astype(np.int64))
    train, test = train_test_split(np.arange(len(labels)), test_size=spec.test_frac,
                                   stratify=labels.numpy(), random_state=spec.seed)
    out = {}
    for name, idx in (("train", np.sort(train)), ("test", np.sort(test))):
        index = torch.from_numpy(idx)
        out[name] = DigitSplit(images[index], labels[index])
    return out


def render(images8: torch.Tensor, size_px: int, spec: DataSpec,
           gen: torch.Generator | None = None) -> torch.Tensor:
    """uint8 [N, size, size] renderings of float [N, 8, 8] digits; a random affine view per
    image when `gen` is given (training), the clean rendering otherwise."""
    x = F.interpolate(images8[:, None], size=(size_px, size_px), mode="bilinear",
                      align_corners=False)
    if gen is not None:
        x = _augment(x, gen, spec)
    return (x[:, 0].clamp(0.0, 1.0) * 255.0).round().to(torch.uint8)


def _augment(x: torch.Tensor, gen: torch.Generator, spec: DataSpec) -> torch.Tensor:
    n, size = x.shape[0], x.shape[-1]

    def uniform(lo: float, hi: float) -> torch.Tensor:
        return lo + (hi - lo) * torch.rand(n, generator=gen)

    angle = uniform(-spec.augment_rotate_deg, spec.augment_rotate_deg) * math.pi / 180.0
    scale = uniform(*spec.augment_scale)
    shift = (torch.rand(n, 2, generator=gen) * 2 - 1) * spec.augment_shift_px * 2.0 / size
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack([torch.stack([cos, -sin, shift[:, 0]], 1),
                         torch.stack([sin, cos, shift[:, 1]], 1)], 1)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def digit_examples(split: DigitSplit) -> list[Example]:
    """One `digit` example per source image."""
    return [Example("digit", "which digit is this?", number_word(int(label)), (i,))
            for i, label in enumerate(split.labels.tolist())]


def sequence_examples(split: DigitSplit, count: int, max_images: int, gen: torch.Generator,
                      num_images: int | None = None) -> list[Example]:
    """`count` `sequence` examples of distinct source images in random order: each of
    `num_images` images, or of a uniform 1..max_images."""
    out = []
    labels = split.labels.tolist()
    for _ in range(count):
        n = num_images or int(torch.randint(1, max_images + 1, (1,), generator=gen))
        ids = torch.randperm(len(labels), generator=gen)[:n].tolist()
        answer = " ".join(number_word(labels[i]) for i in ids)
        out.append(Example("sequence", "read the digits", answer, tuple(ids)))
    return out


def arithmetic_facts(spec: DataSpec) -> dict[str, list[Example]]:
    """All `a plus b` and `a minus b` facts within 0..max_number, split by a seeded shuffle."""
    facts = []
    top = spec.max_number
    for a in range(top + 1):
        for b in range(top + 1):
            if a + b <= top:
                facts.append(_fact(a, "plus", b, a + b))
            if a - b >= 0:
                facts.append(_fact(a, "minus", b, a - b))
    gen = torch.Generator().manual_seed(spec.seed * 7919 + 17)
    order = torch.randperm(len(facts), generator=gen).tolist()
    n_test = round(len(facts) * spec.arithmetic_test_frac)
    return {"test": [facts[i] for i in sorted(order[:n_test])],
            "train": [facts[i] for i in sorted(order[n_test:])]}


def _fact(a: int, op: str, b: int, result: int) -> Example:
    return Example("arithmetic", f"what is {number_word(a)} {op} {number_word(b)}?",
                   number_word(result))


def test_examples(spec: DataSpec, splits: dict[str, DigitSplit] | None = None,
                  ) -> dict[str, list[Example]]:
    """The held-out examples of every task (image ids index the test split)."""
    splits = digit_splits(spec) if splits is None else splits
    gen = torch.Generator().manual_seed(spec.seed * 7919 + 29)
    return {"digit": digit_examples(splits["test"]),
            "sequence": sequence_examples(splits["test"], spec.multi_test_requests,
                                          spec.max_images, gen),
            "arithmetic": arithmetic_facts(spec)["test"]}


def to_pil(image: torch.Tensor) -> Image.Image:
    """An RGB PIL image of a uint8 grey [H, W] rendering (what a client sends)."""
    grey = image.to(torch.uint8).numpy()
    return Image.fromarray(np.stack([grey] * 3, axis=-1), mode="RGB")
