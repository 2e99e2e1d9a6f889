"""A model directory carried inside the application: the builder reads its files once
(`read_model_files`), every replica writes them to a local directory of its own
(`materialize`) and loads from there. So a replica on any node of a cluster serves exactly the
files the builder read, as the classifier families do with their weights (docs/deploy.md)."""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from deployments.engines.architectures import ModelFacts, model_facts

log = logging.getLogger(__name__)

# Files of a model directory the engines read; anything else (training logs, caches) stays.
SUFFIXES = (".json", ".safetensors", ".jinja", ".txt", ".model")


@dataclass(frozen=True)
class ModelFiles:
    name: str
    sha256: str
    files: dict[str, bytes] = field(repr=False)

    @property
    def size_bytes(self) -> int:
        return sum(len(b) for b in self.files.values())

    def facts(self) -> ModelFacts:
        """What its config.json says, through its architecture's adapter."""
        import json

        return model_facts(json.loads(self.files["config.json"]), f"model {self.name}")

    def tokens_per_image(self) -> int:
        """Image tokens per image (the adapter's; 0: a model that takes no images)."""
        return self.facts().tokens_per_image


def read_model_files(path: str | Path, name: str) -> ModelFiles:
    p = Path(path)
    files = {f.name: f.read_bytes() for f in sorted(p.iterdir())
             if f.is_file() and f.name.endswith(SUFFIXES)}
    if "config.json" not in files:
        raise FileNotFoundError(f"{p}: not a model directory (no config.json)")
    digest = hashlib.sha256()
    for n, b in files.items():
        digest.update(n.encode() + b"\0" + hashlib.sha256(b).digest())
    return ModelFiles(name, digest.hexdigest(), files)


def materialize(model: ModelFiles, root: str | Path | None = None) -> Path:
    """The files written under `root` (default: the temp dir) in a directory named by their
    digest; written once per node (a rename makes it appear whole), reused after."""
    base = Path(root or tempfile.gettempdir()) / "adaptserve-models"
    target = base / f"{model.name}-{model.sha256[:16]}"
    if (target / "config.json").is_file():
        return target
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=base))
    for n, b in model.files.items():
        (staging / n).write_bytes(b)
    try:
        os.rename(staging, target)
    except OSError:  # another replica of this node wrote it first
        for f in staging.iterdir():
            f.unlink()
        staging.rmdir()
    log.info("model %s (sha256 %s) at %s", model.name, model.sha256[:12], target)
    return target
