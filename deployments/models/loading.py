"""A classifier family's model by its source (`classifiers[].model`), loaded from paths.

The builder resolves a source once (`model_ref`: trains a builtin family if its cache is stale,
checks the checkpoint paths exist) into a `ModelRef`: a few hundred bytes naming the files and
their fingerprint. Each replica loads from those paths itself (`load_ref`): on a cluster the
paths must be on every node (a volume mounted at the same path, or baked into the image;
docs/deploy.md), and a node whose files differ from what the builder saw fails its start,
naming the path, instead of serving other weights.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deployments.models.base import Example, Prediction, ServableModel
from deployments.models.fingerprints import files_fingerprint
from deployments.models.sources import (
    BuiltinModel,
    CheckpointModel,
    DatasetConfig,
    ImportedModel,
    ModelSource,
)
from policies.types import Variant


@dataclass(frozen=True)
class ModelRef:
    """What a replica is handed: the family, its source (config JSON) and the fingerprint of
    the files it loads."""

    family: str
    source: dict[str, Any]
    paths: tuple[str, ...]
    fingerprint: str


def source_paths(source: ModelSource, models_dir: Path) -> tuple[Path, ...]:
    """The files or directories a source loads from (builtin: the trained weights)."""
    if isinstance(source, BuiltinModel):
        from deployments.models.train_families import cache_paths

        return (cache_paths(source.builtin, models_dir)[0],)
    if isinstance(source, CheckpointModel):
        return tuple(Path(c.path) for c in source.checkpoints)
    return ()


def fingerprint(paths: tuple[Path, ...]) -> str:
    """The fingerprint (deployments/models/fingerprints.py) of every file under `paths` (the
    same paths on every node); a missing path is a FileNotFoundError naming it."""
    files: list[tuple[str, Path]] = []
    for root in paths:
        if not root.exists():
            raise FileNotFoundError(f"model path {root} does not exist")
        if root.is_dir():
            files += [(str(f), f) for f in sorted(root.rglob("*")) if f.is_file()]
        else:
            files.append((str(root), root))
    return files_fingerprint(files)


def model_ref(family: str, source: ModelSource, models_dir: Path) -> ModelRef:
    """The builder's side: a builtin family trained if stale, every path checked."""
    if isinstance(source, BuiltinModel):
        from deployments.models.registry import ensure_trained

        ensure_trained(source.builtin, models_dir)
    paths = source_paths(source, models_dir)
    return ModelRef(family, source.model_dump(mode="json"), tuple(str(p) for p in paths),
                    fingerprint(paths))


def load_ref(ref: ModelRef, device: str = "cpu") -> ServableModel:
    """The replica's side: the files checked against the builder's fingerprint, then loaded."""
    from pydantic import TypeAdapter

    source: ModelSource = TypeAdapter(ModelSource).validate_python(ref.source)
    found = fingerprint(tuple(Path(p) for p in ref.paths))
    if found != ref.fingerprint:
        raise ValueError(f"{ref.family}: the model files at {list(ref.paths)} differ from the "
                         f"ones the application was built with (fingerprint {found[:12]} != "
                         f"{ref.fingerprint[:12]}): every node must see the same files")
    return load_source(ref.family, source, Path(ref.paths[0]) if ref.paths else None,
                       dataset=None, device=device)


def load_source(family: str, source: ModelSource, weights: Path | None,
                dataset: DatasetConfig | None, device: str = "cpu") -> ServableModel:
    """The servable of `source` on `device`; `weights`: a builtin family's weights file;
    `dataset`: where held-out examples come from (None: the model's own)."""
    import torch

    model: ServableModel
    if isinstance(source, BuiltinModel):
        from deployments.models.registry import load_trained

        model = load_trained(source.builtin, weights)
    elif isinstance(source, CheckpointModel):
        from deployments.models.checkpoint.family import CheckpointFamily

        return CheckpointFamily(family, source, dataset).to(torch.device(device))
    else:
        model = imported(source)
    if dataset is not None:
        model = WithDataset(model, dataset)
    return model.to(torch.device(device))


def imported(source: ImportedModel) -> ServableModel:
    """`factory(**kwargs)` of `pkg.module:factory`, checked to be a ServableModel."""
    module_name, attr = source.import_path.split(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"import_path {source.import_path!r}: {type(exc).__name__}: "
                         f"{exc}") from None
    model = factory(**source.kwargs)
    if not isinstance(model, ServableModel):
        raise ValueError(f"import_path {source.import_path!r} returned "
                         f"{type(model).__name__}, not a deployments.models.base.ServableModel")
    return model


class WithDataset(ServableModel):
    """An imported or builtin family whose held-out examples come from a configured dataset."""

    def __init__(self, model: ServableModel, dataset: DatasetConfig) -> None:
        from deployments.models.checkpoint.dataset import read_dataset

        self.model = model
        self.name = model.name
        self.data = {t: read_dataset(dataset, t, model.label_names(t)) for t in model.tasks()}

    def variants(self) -> tuple[Variant, ...]:
        return self.model.variants()

    def tasks(self) -> tuple[str, ...]:
        return self.model.tasks()

    def modalities(self) -> tuple[str, ...]:
        return self.model.modalities()

    def label_names(self, task: str) -> tuple[str, ...] | None:
        return self.model.label_names(task)

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, Any]:
        return self.model.decode(inputs, task)

    def run(self, variant: Variant, task: str, items: list[dict[str, Any]]) -> list[Prediction]:
        return self.model.run(variant, task, items)

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        return self.data[task].examples(split, task, limit)

    def to(self, device: Any) -> WithDataset:
        self.model.to(device)
        return self
