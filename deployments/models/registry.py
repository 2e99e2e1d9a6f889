"""`load_model(name)`: the trained ServableModel of a family, training it on first use.

Weights are cached as safetensors (never pickles) next to a JSON metadata file whose config hash
decides staleness (see `train_families.py`); a file lock serialises concurrent first uses (e.g. several
replicas starting at once).

Serve replicas never train: the builder trains what is stale (`ensure_trained`) and hands each
replica the weights file's path and fingerprint (`deployments/models/loading.py`); the replica
loads it with `load_trained`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from deployments.models.base import ServableModel
from deployments.models.cache import file_lock
from deployments.models.train_families import (
    DEFAULT_CACHE,
    SPECS,
    FamilySpec,
    cache_paths,
    config_hash,
    read_metadata,
    train_and_save,
)

log = logging.getLogger(__name__)


__all__ = ["ensure_trained", "family_names", "load_model", "load_trained", "read_metadata"]


def family_names() -> tuple[str, ...]:
    return tuple(SPECS)


def ensure_trained(name: str, cache_dir: Path = DEFAULT_CACHE) -> Path:
    """Train family `name` into `cache_dir` unless current weights are there; the weights file.

    Separate from `load_model` so that a test session or an artifact step can pay for training
    once, up front, without building the servable."""
    spec = _spec(name)
    cache_dir = Path(cache_dir)
    if spec.base is not None:
        ensure_trained(spec.base, cache_dir)
    cfg = spec.config()
    weights, _ = cache_paths(name, cache_dir)
    with file_lock(cache_dir / f".{name}.lock"):
        meta = read_metadata(name, cache_dir)
        if meta is None or meta.get("config_hash") != config_hash(cfg) or not weights.is_file():
            log.info("%s: no current cached weights in %s, training", name, cache_dir)
            train_and_save(name, cache_dir, cfg)
    return weights


def load_model(name: str, cache_dir: Path = DEFAULT_CACHE, device: str = "cpu") -> ServableModel:
    """The servable family `name` ("vit", "fusion" or "family") on `device`."""
    state = load_file(str(ensure_trained(name, cache_dir)), device="cpu")
    return _servable(_spec(name), state, device)


def load_trained(name: str, weights: Path | None, device: str = "cpu") -> ServableModel:
    """The servable family `name` from its trained weights file (never training: a replica
    loads what the builder trained)."""
    if weights is None or not Path(weights).is_file():
        raise FileNotFoundError(f"{name}: trained weights {weights} not found")
    return _servable(_spec(name), load_file(str(weights), device="cpu"), device)


def _servable(spec: FamilySpec, state: dict[str, Any], device: str) -> ServableModel:
    cfg = spec.config()
    model = spec.build(cfg)
    model.load_state_dict(state, strict=True)
    model.eval()
    return spec.servable(model, cfg).to(torch.device(device))


def _spec(name: str) -> FamilySpec:
    if name not in SPECS:
        raise ValueError(f"unknown model family {name!r}; valid names: {sorted(SPECS)}")
    return SPECS[name]
