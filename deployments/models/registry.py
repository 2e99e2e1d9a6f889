"""`load_model(name)`: the trained ServableModel of a family, training it on first use.

Weights are cached as safetensors (never pickles) next to a JSON metadata file whose config hash
decides staleness (see `train.py`); a file lock serialises concurrent first uses (e.g. several
replicas starting at once).
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors.torch import load_file

from deployments.models.base import ServableModel
from deployments.models.train import (
    DEFAULT_CACHE,
    SPECS,
    cache_paths,
    config_hash,
    read_metadata,
    train_and_save,
)

log = logging.getLogger(__name__)


__all__ = ["family_names", "load_model", "read_metadata"]


def family_names() -> tuple[str, ...]:
    return tuple(SPECS)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load_model(name: str, cache_dir: Path = DEFAULT_CACHE, device: str = "cpu") -> ServableModel:
    """The servable family `name` ("vit", "fusion" or "family") on `device`."""
    if name not in SPECS:
        raise ValueError(f"unknown model family {name!r}; valid names: {sorted(SPECS)}")
    spec = SPECS[name]
    cache_dir = Path(cache_dir)
    cfg = spec.config()
    wanted = config_hash(cfg)
    weights, _ = cache_paths(name, cache_dir)
    with _locked(cache_dir / f".{name}.lock"):
        meta = read_metadata(name, cache_dir)
        if meta is None or meta.get("config_hash") != wanted or not weights.is_file():
            log.info("%s: no current cached weights in %s, training", name, cache_dir)
            train_and_save(name, cache_dir, cfg)
        state = load_file(str(weights), device="cpu")
    model = spec.build(cfg)
    model.load_state_dict(state, strict=True)
    model.eval()
    return spec.servable(model, cfg).to(torch.device(device))
