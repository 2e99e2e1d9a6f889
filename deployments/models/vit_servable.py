"""Serving a trained `TokenViT` (`vit_tokens.py`): one variant per gamma, "<family>/g<gamma>".

`TokenViTServable` serves the digits ViT ("vit": 16x16 grey digits); a subclass sets `name`, the
input side and its held-out examples (the scenes ViT, `scene_vit.py`)."""

from __future__ import annotations

from typing import Any

import torch

from deployments.models.base import Example, Prediction, ServableModel
from deployments.models.data import IMAGE_SIZE, DigitLabelNames, image_split, task_labels
from deployments.models.input_decoding import check_fields, check_task, decode_image, encode_image
from deployments.models.vit_tokens import TASKS, TokenViT, variant_name
from policies.types import Variant


class TokenViTServable(DigitLabelNames, ServableModel):
    """`ServableModel` over a trained `TokenViT`; variants "<name>/g<gamma>"."""

    name = "vit"
    side = IMAGE_SIZE  # the input side a request's image is resized to

    def __init__(self, model: TokenViT) -> None:
        self.model = model.eval()
        self.cfg = model.cfg
        self._variants = tuple(Variant(name=variant_name(g, self.name), model=self.name,
                                       modalities=frozenset({"image"}), gamma=g)
                               for g in self.cfg.gammas)

    def variants(self) -> tuple[Variant, ...]:
        return self._variants

    def tasks(self) -> tuple[str, ...]:
        return TASKS

    def modalities(self) -> tuple[str, ...]:
        return ("image",)

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, torch.Tensor]:
        check_task(task, TASKS)
        fields = check_fields(inputs, required=("image",), allowed=("image",))
        return {"image": decode_image(fields["image"], "image", self.side, self.side)}

    def run(self, variant: Variant, task: str,
            items: list[dict[str, torch.Tensor]]) -> list[Prediction]:
        if variant not in self._variants:
            raise ValueError(f"unknown variant {variant.name!r} for family {self.name}")
        check_task(task, TASKS)
        if not items:
            return []
        x = torch.stack([item["image"] for item in items]).to(next(self.model.parameters()).device)
        with torch.inference_mode():
            probs = self.model(x, task, variant.gamma).softmax(-1)
        conf, label = probs.max(-1)
        return [Prediction(label=int(lbl), confidence=float(c))
                for lbl, c in zip(label.tolist(), conf.tolist(), strict=True)]

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        if split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test', got {split!r}")
        check_task(task, TASKS)
        images, digits = self.held_out(split)
        labels = task_labels(task, digits)
        n = len(labels) if limit is None else min(limit, len(labels))
        return [Example(inputs={"image": encode_image(images[i])}, label=int(labels[i]),
                        task=task) for i in range(n)]

    def held_out(self, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        """uint8 images and digit labels of a held-out split."""
        return image_split(split, self.cfg.data)

    def to(self, device: torch.device) -> TokenViTServable:
        self.model.to(device)
        return self
