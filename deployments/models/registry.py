"""`load_model(name)`: the trained ServableModel of a family, training it on first use.

Weights are cached as safetensors (never pickles) next to a JSON metadata file whose config hash
decides staleness (see `train_families.py`); a file lock serialises concurrent first uses (e.g. several
replicas starting at once).

Serve replicas do not read the cache: the app builder reads each family's weights once
(`read_weights`) and hands the bytes to every replica (`load_weights`), so a replica on any node
of a cluster serves exactly the weights the builder profiled, and never trains at start.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as load_safetensors_bytes
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


__all__ = ["FamilyWeights", "ensure_trained", "family_names", "load_model", "load_weights",
           "read_metadata", "read_weights"]

# Weights travel inside the application (Serve keeps deployment arguments in its controller's
# checkpoint in the GCS, rewritten when a deployment's target changes); beyond this size the
# builder warns that an artifact store or the image would serve them better.
INLINE_WEIGHTS_WARN_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class FamilyWeights:
    """A family's trained state dict as safetensors bytes and their sha256 (checked where they
    are loaded; replicas log it, so an operator sees every replica serves the same model)."""

    name: str
    sha256: str
    data: bytes = field(repr=False)


def family_names() -> tuple[str, ...]:
    return tuple(SPECS)


def ensure_trained(name: str, cache_dir: Path = DEFAULT_CACHE) -> Path:
    """Train family `name` into `cache_dir` unless current weights are there; the weights file.

    Separate from `load_model` so that a test session or an artifact step can pay for training
    once, up front, without building the servable."""
    spec = _spec(name)
    cache_dir = Path(cache_dir)
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


def read_weights(name: str, cache_dir: Path = DEFAULT_CACHE) -> FamilyWeights:
    """Family `name`'s current weights from `cache_dir` (trained first if stale or missing), as
    bytes a replica on another node can load."""
    data = ensure_trained(name, cache_dir).read_bytes()
    if len(data) > INLINE_WEIGHTS_WARN_BYTES:
        log.warning("%s: %d MiB of weights travel inside the Serve application (above %d MiB: "
                    "prefer baking them into the image or an artifact store)", name,
                    len(data) >> 20, INLINE_WEIGHTS_WARN_BYTES >> 20)
    return FamilyWeights(name, hashlib.sha256(data).hexdigest(), data)


def load_weights(weights: FamilyWeights, device: str = "cpu") -> ServableModel:
    """The servable of `weights` (from `read_weights`) on `device`; bytes that do not match
    their sha256 are a ValueError."""
    digest = hashlib.sha256(weights.data).hexdigest()
    if digest != weights.sha256:
        raise ValueError(f"{weights.name}: weights sha256 {digest} != expected {weights.sha256}")
    return _servable(_spec(weights.name), load_safetensors_bytes(weights.data), device)


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
