"""A model directory served from a path: the LLM stage, the image encoders and the ingress each
load it from the same path on their own node; no file travels in the application's arguments,
only the path, the name and the directory's fingerprint (a few hundred bytes).

The builder checks the directory and takes its fingerprint (`ModelDir.at`); every replica checks
at start that the path holds the very files the builder saw (`ModelDir.verified`), so a node
with another copy, or none, fails its replicas naming the path instead of serving. On a cluster
the path must be one every node sees: a volume mounted at the same path in every Ray pod, or
files baked into the image (docs/deploy.md, Model directories)."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from pathlib import Path

from deployments.engines.architectures import ModelFacts, model_facts
from deployments.models.fingerprints import files_fingerprint

# Files of a model directory the engines read; anything else (training logs, caches) is ignored.
SUFFIXES = (".json", ".safetensors", ".jinja", ".txt", ".model")
EVERY_NODE = ("every node needs the same model directory at this path (docs/deploy.md, Model "
              "directories)")


@dataclass(frozen=True)
class ModelDir:
    """`path`: absolute, the same on every node; `fingerprint`: what `fingerprint` gave there
    when the builder looked."""

    name: str
    path: str
    fingerprint: str

    @classmethod
    def at(cls, path: str | Path, name: str) -> ModelDir:
        """The model directory at `path` (FileNotFoundError naming it: missing, not a
        directory, no config.json, a file unreadable)."""
        p = Path(path).absolute()
        return cls(name, str(p), fingerprint(p))

    def verified(self) -> ModelDir:
        """This directory as this node sees it, checked against the builder's fingerprint
        (FileNotFoundError: the path is missing here; ValueError: other files at the path)."""
        node = socket.gethostname()
        try:
            found = fingerprint(Path(self.path))
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"model {self.name} on node {node}: {exc}: {EVERY_NODE}"
                                    ) from None
        if found != self.fingerprint:
            raise ValueError(
                f"model {self.name}: {self.path} on node {node} holds other files than the "
                f"builder read (fingerprint {found[:16]}, the builder's "
                f"{self.fingerprint[:16]}): {EVERY_NODE}")
        return self

    def file(self, name: str) -> Path:
        return Path(self.path) / name

    def facts(self) -> ModelFacts:
        """What its config.json says, through its architecture's adapter."""
        pre = self.file("preprocessor_config.json")
        return model_facts(json.loads(self.file("config.json").read_bytes()),
                           f"model {self.name}",
                           json.loads(pre.read_bytes()) if pre.is_file() else None)

    def tokens_per_image(self) -> int:
        """Image tokens per image (the adapter's; 0: a model that takes no images)."""
        return self.facts().tokens_per_image


def fingerprint(path: Path) -> str:
    """The fingerprint (deployments/models/fingerprints.py) of the engine-read files of the
    directory at `path`."""
    try:
        return files_fingerprint((f.name, f) for f in _engine_files(path))
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"model directory {path}: {exc}") from None


def _engine_files(path: Path) -> list[Path]:
    if not path.is_dir():
        what = "not a directory" if path.exists() else "no such directory"
        raise FileNotFoundError(f"model directory {path}: {what}")
    try:
        files = sorted(f for f in path.iterdir() if f.name.endswith(SUFFIXES) and f.is_file())
    except OSError as exc:
        raise FileNotFoundError(f"model directory {path} is unreadable: "
                                f"{exc.strerror or exc}") from None
    if not any(f.name == "config.json" for f in files):
        raise FileNotFoundError(f"model directory {path}: no config.json (not a model directory)")
    return files
