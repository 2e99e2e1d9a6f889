"""`CheckpointFamily`: the user's checkpoints of one task as one servable family, each
checkpoint a variant (the knob is which model runs: RAMSIS-style selection among them).
`MemberClassifier` is its serving half, shared with our own model-selection ladder
(`deployments/models/ladder.py`), which is served through the same code.

An item is decoded once, before a variant is chosen, into the pixels every distinct input
(size, channels) of the family needs; a variant normalises its own on the batch."""

from __future__ import annotations

from typing import Any

import torch

from deployments.models.base import Example, Prediction, ServableModel
from deployments.models.checkpoint.dataset import read_dataset
from deployments.models.checkpoint.loaders import (
    CheckpointError,
    ImageTransform,
    LoadedCheckpoint,
    load_checkpoint,
)
from deployments.models.input_decoding import (
    check_fields,
    check_task,
    decode_pixels,
    encode_image,
)
from deployments.models.sources import CheckpointModel, DatasetConfig
from policies.types import Variant

TASK = "classify"


def _key(t: ImageTransform) -> str:
    return f"image@{t.channels}x{t.size}"


class MemberClassifier(ServableModel):
    """Image classifiers of one task as one family, each loaded member a variant: an item is
    decoded once into the pixels every distinct input (size, channels) needs, and a variant
    normalises its own on the batch. Held-out examples come from the subclass."""

    def __init__(self, name: str, members: dict[str, LoadedCheckpoint],
                 labels: tuple[str, ...] | None, task: str = TASK) -> None:
        self.name = name
        self.members = members
        self.labels = labels
        self.task = task
        self._variants = tuple(Variant(name=n, model=n, modalities=frozenset({"image"}))
                               for n in self.members)
        self._inputs = {_key(m.transform): m.transform for m in self.members.values()}

    def variants(self) -> tuple[Variant, ...]:
        return self._variants

    def tasks(self) -> tuple[str, ...]:
        return (self.task,)

    def modalities(self) -> tuple[str, ...]:
        return ("image",)

    def label_names(self, task: str) -> tuple[str, ...] | None:
        return self.labels

    def probe_inputs(self, task: str) -> dict[str, Any]:
        """A mid-grey image of the family's largest input (replicas load no dataset)."""
        side = max(t.size for t in self._inputs.values())
        return {"image": encode_image(torch.full((side, side), 128, dtype=torch.uint8))}

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, torch.Tensor]:
        check_task(task, (self.task,))
        fields = check_fields(inputs, required=("image",), allowed=("image",))
        return {key: decode_pixels(fields["image"], "image", t.size, t.size,
                                   "L" if t.channels == 1 else "RGB")
                for key, t in self._inputs.items()}

    def run(self, variant: Variant, task: str,
            items: list[dict[str, torch.Tensor]]) -> list[Prediction]:
        member = self.members.get(variant.name)
        if member is None:
            raise ValueError(f"unknown variant {variant.name!r} of {self.name}; valid: "
                             f"{list(self.members)}")
        check_task(task, (self.task,))
        if not items:
            return []
        device = _device(member.module)
        pixels = torch.stack([item[_key(member.transform)] for item in items])
        x = member.transform.normalise(pixels).to(device)
        with torch.inference_mode():
            probs = member.module(x).float().softmax(-1)
        conf, label = probs.max(-1)
        return [Prediction(label=int(lbl), confidence=float(c))
                for lbl, c in zip(label.tolist(), conf.tolist(), strict=True)]

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        raise ValueError(f"{self.name}: no held-out examples")

    def to(self, device: torch.device) -> MemberClassifier:
        for m in self.members.values():
            m.module.to(device)
        return self


class CheckpointFamily(MemberClassifier):
    """The user's checkpoints of one task (`classifiers[].model.checkpoints`), held-out
    examples from `classifiers[].dataset`."""

    def __init__(self, name: str, source: CheckpointModel, dataset: DatasetConfig | None,
                 ) -> None:
        members = {c.name: load_checkpoint(c, source.input) for c in source.checkpoints}
        classes = {n: m.num_classes for n, m in members.items()}
        if len(set(classes.values())) != 1:
            raise CheckpointError(f"family {name}: checkpoints disagree on the number of "
                                  f"classes {classes}")
        self.num_classes = next(iter(classes.values()))
        super().__init__(name, members, self._label_names(name, members, source))
        self.data = (None if dataset is None else
                     read_dataset(dataset, TASK, self.labels))
        if self.labels is None and self.data is not None:
            self.labels = self.data.label_names

    def _label_names(self, name: str, members: dict[str, LoadedCheckpoint],
                     source: CheckpointModel) -> tuple[str, ...] | None:
        own = {n: m.labels for n, m in members.items() if m.labels is not None}
        names = tuple(source.labels) if source.labels else next(iter(own.values()), None)
        if names is not None and len(names) != self.num_classes:
            raise CheckpointError(f"family {name}: {len(names)} label names for "
                                  f"{self.num_classes} classes")
        return names

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        check_task(task, (TASK,))
        if self.data is None:
            raise ValueError(f"{self.name}: no dataset configured (classifiers[].dataset)")
        return self.data.examples(split, task, limit)


def _device(module: torch.nn.Module) -> torch.device:
    first = next(iter(module.parameters()), None)
    return torch.device("cpu") if first is None else first.device

