"""Weights travel to replicas as bytes (`read_weights` -> `load_weights`): a replica on another
node serves exactly the weights the builder read, and refuses bytes that do not match."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from deployments.models.registry import load_model, load_weights, read_weights


def test_weights_as_bytes_load_the_same_model(trained_models_dir: Path) -> None:
    weights = read_weights("vit", trained_models_dir)
    assert len(weights.sha256) == 64 and weights.data and "data=" not in repr(weights)
    from_bytes = load_weights(weights)
    from_file = load_model("vit", cache_dir=trained_models_dir)
    task = from_file.tasks()[0]
    items = [from_file.decode(e.inputs, task) for e in from_file.examples("val", task, limit=4)]
    with torch.inference_mode():
        for variant in from_file.variants():
            assert from_bytes.run(variant, task, items) == from_file.run(variant, task, items)


def test_bytes_that_do_not_match_their_digest_are_refused(trained_models_dir: Path) -> None:
    weights = read_weights("fusion", trained_models_dir)
    flipped = bytes([weights.data[-1] ^ 1])
    bad = dataclasses.replace(weights, data=weights.data[:-1] + flipped)
    with pytest.raises(ValueError, match="fusion: weights sha256"):
        load_weights(bad)
