"""A family of the user's checkpoints (deployments/models/checkpoint/), built here as a download
looks on disk (tests/helpers/own_classifiers.py): what it reads from each checkpoint, the answers
it gives, and each misconfiguration a start-up error naming the checkpoint and the problem."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deployments.classifier.config import ClassifierConfig
from deployments.models.base import InputError
from deployments.models.checkpoint.dataset import DatasetError
from deployments.models.checkpoint.family import CheckpointFamily
from deployments.models.checkpoint.loaders import CheckpointError
from deployments.models.loading import load_source
from deployments.models.sources import CheckpointModel, DatasetConfig, ImportedModel
from profiling.measure import profile_model
from tests.helpers import own_classifiers as oc


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("own")
    return {"data": oc.image_folder(root / "data", per_label=6),
            "timm": oc.timm_checkpoints(root / "timm"), "hf": oc.hf_classifier(root / "hf"),
            "script": oc.torchscript_classifier(root / "script.pt"), "root": root}


def family(checkpoints: list[dict[str, Any]], data: Path | None, **extra: Any) -> CheckpointFamily:
    source = CheckpointModel.model_validate({"checkpoints": checkpoints, **extra})
    return CheckpointFamily("mine", source, None if data is None else DatasetConfig(path=str(data)))


def test_a_timm_family_reads_sizes_and_names_from_its_checkpoints(disk: dict[str, Any]) -> None:
    fam = family(disk["timm"], disk["data"])
    assert [v.name for v in fam.variants()] == list(oc.TIMM_ARCHS)
    assert fam.label_names("classify") == oc.LABELS  # the hub config's label_names
    assert {m.transform.size for m in fam.members.values()} == {oc.SIDE}
    vit = fam.members["vit"].transform
    assert vit.mean == (0.5,) * 3 and vit.std == (0.5,) * 3  # its pretrained_cfg, not ImageNet's
    test = fam.examples("test", "classify")
    val = fam.examples("val", "classify")
    assert test and val and len(test) + len(val) == 3 * 6
    items = [fam.decode(e.inputs, "classify") for e in test[:3]]
    for v in fam.variants():
        preds = fam.run(v, "classify", items)
        assert len(preds) == 3 and all(0 <= p.label < 3 and 0 < p.confidence <= 1 for p in preds)
    with pytest.raises(InputError, match="image"):
        fam.decode({"image": "AA=="}, "classify")


def test_an_hf_classifier_names_its_labels_from_id2label(disk: dict[str, Any]) -> None:
    fam = family([{"name": "hf", "format": "hf", "path": str(disk["hf"])},
                  {"name": "script", "format": "torchscript", "path": str(disk["script"]),
                   "input": {"size": oc.SIDE}}], disk["data"])
    assert fam.label_names("classify") == oc.LABELS
    profile = profile_model(fam, "classify", (1, 2), repeats=2, min_time_s=0.0, progress=False)
    assert {vp.variant.name for vp in profile.variants} == {"hf", "script"}
    for vp in profile.variants:
        assert 0.0 <= vp.accuracy <= 1.0 and vp.latency


def test_imported_family_takes_its_examples_from_a_dataset(disk: dict[str, Any],
                                                          tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"inputs": {"x": [0, 1, 0]}, "label": 1}\n' * 4 +
                    '{"inputs": {"x": [1, 0, 0]}, "label": 0}\n' * 4)
    model = load_source("imported", ImportedModel(
        import_path="tests.integration.fake_family:FakeFamily"), None,
        DatasetConfig(path=str(rows), format="jsonl"))
    examples = model.examples("test", "argmax") + model.examples("val", "argmax")
    assert sorted(e.label for e in examples) == [0] * 4 + [1] * 4


@pytest.mark.parametrize("change, message", [
    ({"architecture": "resnet_nonexistent"}, "unknown timm architecture 'resnet_nonexistent'"),
    ({"path": "/nowhere/w.safetensors"}, "/nowhere/w.safetensors does not exist"),
    ({"architecture": "resnet34"}, "do not fit timm 'resnet34'"),
])
def test_a_bad_timm_checkpoint_is_named(disk: dict[str, Any], change: dict[str, Any],
                                       message: str) -> None:
    bad = {**disk["timm"][0], **change}
    with pytest.raises(CheckpointError, match=f"checkpoint 'small'.*{message}"):
        family([bad], disk["data"])


def test_an_input_size_the_checkpoint_does_not_take_is_a_start_error(
        disk: dict[str, Any]) -> None:
    vit = {**disk["timm"][2], "input": {"size": 64}}  # its config says 32; a ViT takes only that
    with pytest.raises(CheckpointError, match="checkpoint 'vit': the model does not take a "
                                              "3x64x64 input"):
        family([vit], disk["data"])


def test_label_names_and_data_must_agree_with_the_checkpoints(disk: dict[str, Any],
                                                              tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="2 label names for 3 classes"):
        family(disk["timm"][:1], disk["data"], labels=["a", "b"])
    (tmp_path / "cat").mkdir()
    (tmp_path / "dog").mkdir()
    with pytest.raises(DatasetError, match=r"folders \['cat', 'dog'\] are not label names"):
        family(disk["timm"][2:], tmp_path)


def test_checkpoints_need_a_dataset_and_an_architecture_for_timm() -> None:
    with pytest.raises(ValueError, match="checkpoints need a `dataset`"):
        ClassifierConfig.model_validate({"name": "mine", "model": {"checkpoints": [
            {"name": "a", "format": "torchscript", "path": "/x.pt"}]}})
    with pytest.raises(ValueError, match="format timm needs `architecture`"):
        CheckpointModel.model_validate({"checkpoints": [
            {"name": "a", "format": "timm", "path": "/x.safetensors"}]})


def test_a_classifier_with_no_model_and_no_builtin_name_names_the_choices() -> None:
    assert ClassifierConfig.model_validate({"name": "vit"}).source().builtin == "vit"
    with pytest.raises(ValueError, match=r"classifier 'x': no `model`; give one of \{builtin"):
        ClassifierConfig.model_validate({"name": "x"}).source()
