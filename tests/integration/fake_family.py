"""A tiny fake model family (no weights) for tests of the Serve plumbing (bench/experiments/single_request/bare_graph.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from deployments.models.base import Example, InputError, Prediction, ServableModel
from policies.types import Variant

COMPUTE_S = 0.02


class FakeFamily(ServableModel):
    """Input {"x": [floats]}; predicts the argmax; every batch takes COMPUTE_S."""

    name = "fake"

    def variants(self) -> tuple[Variant, ...]:
        return (Variant("small", "small"), Variant("big", "big"))

    def tasks(self) -> tuple[str, ...]:
        return ("argmax",)

    def modalities(self) -> tuple[str, ...]:
        return ("x",)

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, torch.Tensor]:
        x = inputs.get("x")
        if not isinstance(x, list) or not x:
            raise InputError("x: expected a non-empty list of numbers")
        return {"x": torch.tensor(x, dtype=torch.float32)}

    def run(self, variant: Variant, task: str,
            items: list[dict[str, torch.Tensor]]) -> list[Prediction]:
        time.sleep(COMPUTE_S)
        return [Prediction(int(it["x"].argmax()), 1.0) for it in items]

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        out = [Example({"x": [float((i + j) % 3) for j in range(3)]}, (2 - i) % 3, task)
               for i in range(limit or 12)]
        return out


def load_model(name: str, cache_dir: Path | None = None, device: str = "cpu") -> FakeFamily:
    return FakeFamily()
