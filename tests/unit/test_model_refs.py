"""Replicas load a family from paths (`model_ref` -> `load_ref`): what they are handed is a few
hundred bytes, they serve the very model the builder loaded, and files that differ from the
builder's (another node's copy) or a missing path fail the start, naming the path."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest
import torch

from deployments.models.loading import fingerprint, load_ref, model_ref
from deployments.models.registry import load_model
from deployments.models.sources import BuiltinModel, CheckpointModel


def test_a_builtin_family_loads_from_its_path_as_the_registry_serves_it(
        trained_models_dir: Path) -> None:
    ref = model_ref("vit", BuiltinModel(builtin="vit"), trained_models_dir)
    assert len(pickle.dumps(ref)) < 2048  # paths and a fingerprint, never the weights
    from_ref = load_ref(ref)
    from_registry = load_model("vit", cache_dir=trained_models_dir)
    task = from_registry.tasks()[0]
    items = [from_registry.decode(e.inputs, task)
             for e in from_registry.examples("val", task, limit=4)]
    with torch.inference_mode():
        for variant in from_registry.variants():
            assert from_ref.run(variant, task, items) == from_registry.run(variant, task, items)


def test_files_that_differ_from_the_builders_are_refused_naming_the_path(
        trained_models_dir: Path, tmp_path: Path) -> None:
    ref = model_ref("fusion", BuiltinModel(builtin="fusion"), trained_models_dir)
    copy = tmp_path / "fusion.safetensors"
    shutil.copy(ref.paths[0], copy)
    data = bytearray(copy.read_bytes())
    data[-1] ^= 1
    copy.write_bytes(bytes(data))
    other_node = ref.__class__(ref.family, ref.source, (str(copy),), ref.fingerprint)
    with pytest.raises(ValueError, match=f"fusion: the model files at .*{copy.name}.* differ"):
        load_ref(other_node)


def test_a_missing_checkpoint_path_is_named(tmp_path: Path) -> None:
    source = CheckpointModel.model_validate({"checkpoints": [
        {"name": "a", "format": "torchscript", "path": str(tmp_path / "nowhere.pt")}]})
    with pytest.raises(FileNotFoundError, match="nowhere.pt does not exist"):
        model_ref("mine", source, tmp_path)


def test_the_fingerprint_covers_every_file_of_a_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "config.json").write_text("{}")
    before = fingerprint((tmp_path / "d",))
    (tmp_path / "d" / "weights.bin").write_bytes(b"x")
    assert fingerprint((tmp_path / "d",)) != before
