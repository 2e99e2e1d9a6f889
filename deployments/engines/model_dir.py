"""Facts of a model directory both engines load (config.json through its architecture's
adapter, deployments/engines/architectures.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from deployments.engines.architectures import ModelFacts, read_facts


@dataclass(frozen=True)
class ModelDirFacts:
    path: str
    model: ModelFacts

    @property
    def image_token_id(self) -> int | None:
        return self.model.image_token_id

    @property
    def tokens_per_image(self) -> int:
        return self.model.tokens_per_image

    @property
    def text_hidden(self) -> int:
        return self.model.text_hidden

    @property
    def max_position(self) -> int:
        return self.model.max_position

    @property
    def takes_images(self) -> bool:
        return self.model.takes_images


def read_model_dir(path: str | Path) -> ModelDirFacts:
    """Reads config.json; a directory no adapter serves is a clear error naming the supported
    model types."""
    return ModelDirFacts(str(Path(path)), read_facts(path))
