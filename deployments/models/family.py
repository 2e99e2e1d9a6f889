"""Model-selection family ("family"): independent digit classifiers of increasing size.

All read the hardened 16x16 digits of `data.py` (task "digits", 10 classes) and are trained with
the same recipe (AdamW, one-cycle, label smoothing, fresh augmented views every epoch):

- "family/linear": softmax regression on the 256 pixels;
- "family/mlp": 256 -> 256 -> 10 with GELU;
- "family/cnn-s", "family/cnn-m", "family/cnn-l": two conv3x3 + max-pool stages (width w, 2w),
  then a 128-unit hidden layer, for w = 8, 16, 32;
- "family/cnn-xl": a VGG-style net with batch norm, three stages of two conv3x3 (96, 192, 384
  channels), global average pooling and a linear head: about 85 M multiply-adds per image, ~15x
  the latency of cnn-l at batch 8, so that the most accurate variant's compute outweighs the
  serving stack's per-request cost (as a production-sized model's does) and model selection has
  something to win.

On the held-out test split they lie on an accuracy-latency Pareto front (bigger = slower and more
accurate; see docs/models.md for the measured numbers). `Variant.model` is the variant name.

Wire format (`decode`): {"image": base64 PNG (or any PIL-readable) image, grayscale or RGB, any
size (resized to 16x16), bright ink on a dark background}; task "digits".
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from deployments.models import training as T
from deployments.models.base import Example, Prediction, ServableModel
from deployments.models.data import IMAGE_SIZE, DataConfig, DigitLabelNames, image_split, to_float
from deployments.models.input_decoding import check_fields, check_task, decode_image, encode_image
from policies.types import Variant

log = logging.getLogger(__name__)
CODE_VERSION = 2
TASKS = ("digits",)
CNN_WIDTHS: dict[str, int] = {"cnn-s": 8, "cnn-m": 16, "cnn-l": 32}
XL_WIDTHS = (96, 192, 384)
MEMBERS: tuple[str, ...] = ("linear", "mlp", *CNN_WIDTHS, "cnn-xl")


@dataclass(frozen=True)
class FamilyConfig:
    data: DataConfig = field(default_factory=DataConfig)
    epochs: int = 30
    xl_epochs: int = 8  # batch norm converges fast; the budget is training time (~75 s)
    batch_size: int = 64
    lr: float = 3e-3
    seed: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"code_version": CODE_VERSION, "members": list(MEMBERS), "cnn_widths": CNN_WIDTHS,
                "xl_widths": list(XL_WIDTHS), **asdict(self)}

    def member_epochs(self, member: str) -> int:
        """cnn-xl trains min(xl_epochs, epochs): a shortened config shortens it too."""
        return min(self.xl_epochs, self.epochs) if member == "cnn-xl" else self.epochs


def make_member(kind: str) -> nn.Module:
    pixels = IMAGE_SIZE * IMAGE_SIZE
    if kind == "linear":
        return nn.Sequential(nn.Flatten(), nn.Linear(pixels, 10))
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(pixels, 256), nn.GELU(), nn.Linear(256, 10))
    if kind == "cnn-xl":
        return make_vgg(XL_WIDTHS)
    w = CNN_WIDTHS[kind]
    return nn.Sequential(
        nn.Conv2d(1, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(2 * w * (IMAGE_SIZE // 4) ** 2, 128), nn.ReLU(),
        nn.Linear(128, 10))


def make_vgg(widths: tuple[int, int, int]) -> nn.Sequential:
    def conv(c_in: int, c_out: int) -> list[nn.Module]:
        return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out),
                nn.ReLU()]

    a, b, c = widths
    return nn.Sequential(*conv(1, a), *conv(a, a), nn.MaxPool2d(2),
                         *conv(a, b), *conv(b, b), nn.MaxPool2d(2),
                         *conv(b, c), *conv(c, c), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Linear(c, 10))


class FamilyNet(nn.Module):
    """All members in one module (one safetensors file)."""

    def __init__(self) -> None:
        super().__init__()
        self.members = nn.ModuleDict({k.replace("-", "_"): make_member(k) for k in MEMBERS})

    def forward(self, x: torch.Tensor, member: str) -> torch.Tensor:
        return self.members[member.replace("-", "_")](x)


def variant_name(member: str) -> str:
    return f"family/{member}"


def build(cfg: FamilyConfig) -> FamilyNet:
    with T.deterministic(cfg.seed):
        return FamilyNet()


def train(cfg: FamilyConfig) -> tuple[FamilyNet, dict[str, dict[str, float]]]:
    model = build(cfg)
    clock = T.Stopwatch("family")
    n = len(image_split("train", cfg.data, 0)[1])
    for i, member in enumerate(MEMBERS):
        with T.deterministic(cfg.seed + i):
            gen = torch.Generator().manual_seed(cfg.seed + i)
            net = model.members[member.replace("-", "_")]
            epochs = cfg.member_epochs(member)
            opt, sched = T.optimizer(list(net.parameters()), cfg.lr,
                                     epochs * -(-n // cfg.batch_size), weight_decay=1e-4)
            net.train()
            for epoch in range(epochs):
                images, labels = image_split("train", cfg.data, epoch)
                x = to_float(images)
                for idx in T.batches(n, cfg.batch_size, gen):
                    T.step(F.cross_entropy(net(x[idx]), labels[idx], label_smoothing=0.1),
                           opt, sched)
            net.eval()
        clock.lap(member)
    return model, evaluate(model, cfg, "test")


@torch.no_grad()
def evaluate(model: FamilyNet, cfg: FamilyConfig, split: str) -> dict[str, dict[str, float]]:
    images, labels = image_split(split, cfg.data)
    x = to_float(images)
    return {"digits": {variant_name(m): T.accuracy(lambda b, m=m: model(b, m), x, labels)
                       for m in MEMBERS}}


class FamilyServable(DigitLabelNames, ServableModel):
    """`ServableModel` over a trained `FamilyNet`; one variant per member."""

    name = "family"

    def __init__(self, model: FamilyNet, cfg: FamilyConfig) -> None:
        self.model = model.eval()
        self.cfg = cfg
        self._variants = tuple(Variant(name=variant_name(m), model=variant_name(m),
                                       modalities=frozenset({"image"})) for m in MEMBERS)

    def variants(self) -> tuple[Variant, ...]:
        return self._variants

    def tasks(self) -> tuple[str, ...]:
        return TASKS

    def modalities(self) -> tuple[str, ...]:
        return ("image",)

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, torch.Tensor]:
        check_task(task, TASKS)
        fields = check_fields(inputs, required=("image",), allowed=("image",))
        return {"image": decode_image(fields["image"], "image", IMAGE_SIZE, IMAGE_SIZE)}

    def run(self, variant: Variant, task: str,
            items: list[dict[str, torch.Tensor]]) -> list[Prediction]:
        if variant not in self._variants:
            raise ValueError(f"unknown variant {variant.name!r} for family family")
        check_task(task, TASKS)
        if not items:
            return []
        device = next(self.model.parameters()).device
        x = torch.stack([item["image"] for item in items]).to(device)
        member = variant.name.removeprefix("family/")
        with torch.inference_mode():
            probs = self.model(x, member).softmax(-1)
        conf, label = probs.max(-1)
        return [Prediction(label=int(lbl), confidence=float(c))
                for lbl, c in zip(label.tolist(), conf.tolist(), strict=True)]

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        if split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test', got {split!r}")
        check_task(task, TASKS)
        images, labels = image_split(split, self.cfg.data)
        n = len(labels) if limit is None else min(limit, len(labels))
        return [Example(inputs={"image": encode_image(images[i])}, label=int(labels[i]),
                        task=task) for i in range(n)]

    def to(self, device: torch.device) -> FamilyServable:
        self.model.to(device)
        return self
