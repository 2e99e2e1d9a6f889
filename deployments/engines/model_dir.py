"""Facts of a model directory both engines load (config.json through its architecture's
adapter, deployments/engines/architectures.py), with where it is."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from deployments.engines.architectures import ModelFacts, read_facts


@dataclass(frozen=True, kw_only=True)
class ModelDirFacts(ModelFacts):
    path: str


def read_model_dir(path: str | Path) -> ModelDirFacts:
    """Reads config.json; a directory no adapter serves is a clear error naming the supported
    model types."""
    facts = read_facts(path)
    return ModelDirFacts(**{f.name: getattr(facts, f.name) for f in fields(facts)},
                         path=str(Path(path)))
