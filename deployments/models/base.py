"""The contract every servable model family implements (used by profiling, replicas and tests).

A family is one trained torch model (or a set of trained models) that can execute several
*variants* (`policies.types.Variant`): a model size, a modality subset, a token change gamma.
Replicas decode JSON inputs once (preprocess), queue them, and run a batch on one variant.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import torch

# the contract's input errors (defined torch-free, for the ingress): importable from here
from deployments.models.input_errors import InputError, UnsupportedMediaType  # noqa: F401
from policies.types import Variant


@dataclass(frozen=True)
class Prediction:
    """One item's answer: the predicted class index, its softmax probability and its name
    (None: the family names no labels)."""

    label: int
    confidence: float
    name: str | None = None


@dataclass(frozen=True)
class Example:
    """One held-out item in wire form (what an HTTP client would send) and its true label."""

    inputs: dict[str, Any]
    label: int
    task: str


class ServableModel(ABC):
    """A model family with several executable variants.

    Implementations hold trained weights (loaded from the project's cache, never downloaded) and
    must be safe to call from one worker thread at a time.
    """

    name: str

    @abstractmethod
    def variants(self) -> tuple[Variant, ...]:
        """Every executable variant; names are unique and stable across runs."""

    @abstractmethod
    def tasks(self) -> tuple[str, ...]:
        """Tasks this family answers (e.g. several heads sharing a backbone); first is default."""

    @abstractmethod
    def modalities(self) -> tuple[str, ...]:
        """Input modalities a request may carry; a variant uses the subset in `variant.modalities`
        (empty subset = all of them)."""

    @abstractmethod
    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, torch.Tensor]:
        """Validate one item's wire inputs (JSON values: base64 image bytes, float lists, text)
        and turn them into per-modality tensors without a batch dimension. Raises `InputError`
        naming the problem for anything malformed, unknown or missing; never anything else."""

    @abstractmethod
    def run(self, variant: Variant, task: str,
            items: list[dict[str, torch.Tensor]]) -> list[Prediction]:
        """Run one batch (items from `decode`, same task) on `variant`; one Prediction per item,
        in order. Uses only the modalities of the variant."""

    @abstractmethod
    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        """Held-out items in wire form (`split` in {"val", "test"}), deterministic order."""

    def probe_inputs(self, task: str) -> dict[str, Any]:
        """One valid item in wire form, to warm a replica up before its first request
        (default: the first held-out example)."""
        return self.examples("val", task, limit=1)[0].inputs

    def label_names(self, task: str) -> tuple[str, ...] | None:
        """The name of each class index of `task`, answered beside the index (None: the
        family's labels are indices only)."""
        return None

    def to(self, device: torch.device) -> ServableModel:
        """Move weights to `device` (CUDA when the replica has a GPU); returns self."""
        return self
