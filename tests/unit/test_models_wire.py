"""Wire decoding of the model families: round trips and every InputError case.

Uses untrained models (decode/examples need no weights), so it runs in seconds.
"""

from __future__ import annotations

import base64
import math
from typing import Any

import pytest
import torch

from deployments.models.base import InputError, ServableModel
from deployments.models.family import FamilyConfig, FamilyServable
from deployments.models.family import build as build_family
from deployments.models.fusion import FusionConfig, FusionServable
from deployments.models.fusion import build as build_fusion
from deployments.models.input_decoding import decode_image, encode_image
from deployments.models.ladder import LadderConfig, LadderServable
from deployments.models.ladder import build as build_ladder
from deployments.models.scene_fusion import SceneFusionConfig, SceneFusionServable
from deployments.models.scene_fusion import build as build_scene_fusion
from deployments.models.scene_vit import SceneVitConfig, SceneViTServable
from deployments.models.scene_vit import build as build_scene_vit
from deployments.models.vit_tokens import TokenViTServable, VitConfig
from deployments.models.vit_tokens import build as build_vit
from tests.helpers.images import image_b64


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def servables() -> dict[str, ServableModel]:
    torch.set_num_threads(1)
    return {
        "vit": TokenViTServable(build_vit(VitConfig())),
        "fusion": FusionServable(build_fusion(FusionConfig()), FusionConfig()),
        "family": FamilyServable(build_family(FamilyConfig()), FamilyConfig()),
        "ladder": LadderServable(build_ladder(LadderConfig()), LadderConfig()),
        "scenefusion": SceneFusionServable(build_scene_fusion(SceneFusionConfig()),
                                           SceneFusionConfig()),
        "scenevit": SceneViTServable(build_scene_vit(SceneVitConfig())),
    }


def test_image_round_trip_is_exact() -> None:
    pixels = torch.randint(0, 256, (8, 16), dtype=torch.uint8)
    decoded = decode_image(encode_image(pixels), "image", 8, 16)
    assert decoded.shape == (1, 8, 16)
    assert torch.equal((decoded * 255).round().to(torch.uint8)[0], pixels)


@pytest.mark.parametrize("family", ["vit", "fusion", "family", "scenefusion", "scenevit"])
def test_examples_decode(servables: dict[str, ServableModel], family: str) -> None:
    model = servables[family]
    for task in model.tasks():
        examples = model.examples("test", task, limit=3)
        assert len(examples) == 3
        assert examples == model.examples("test", task, limit=3)  # deterministic
        for ex in examples:
            assert ex.task == task
            tensors = model.decode(ex.inputs, task)
            assert set(tensors) == set(model.modalities())


def test_any_size_and_rgb_images_are_accepted(servables: dict[str, ServableModel]) -> None:
    out = servables["vit"].decode({"image": image_b64(size=(40, 23), color=(10, 200, 30))}, "digits")
    assert out["image"].shape == (1, 16, 16)
    assert abs(float(out["image"].mean()) - 0.0) > 0.1  # converted, not blank


def _fusion_inputs(servables: dict[str, ServableModel], family: str = "fusion") -> dict[str, Any]:
    return dict(servables[family].examples("val", "digits", limit=1)[0].inputs)


FUSION_FAMILIES = pytest.mark.parametrize("family", ["fusion", "scenefusion"])


@pytest.mark.parametrize("family", ["vit", "family", "ladder"])
@pytest.mark.parametrize(("inputs", "field"), [
    ("not a dict", "inputs"),
    ({}, "image"),
    ({"image": 3}, "image"),
    ({"image": ""}, "image"),
    ({"image": "%%%not base64%%%"}, "image"),
    ({"image": base64.b64encode(b"definitely not an image").decode()}, "image"),
    ({"image": "abc"}, "image"),  # bad padding
    ({"image": image_b64(size=(16, 16), color=128), "audio": [0.0]}, "audio"),
    ({"image": image_b64(size=(2000, 10), color=128)}, "image"),
])
def test_image_family_errors(servables: dict[str, ServableModel], family: str, inputs: Any,
                             field: str) -> None:
    with pytest.raises(InputError) as err:
        servables[family].decode(inputs, "digits")
    assert str(err.value).startswith(field)


@pytest.mark.parametrize("family", ["vit", "fusion", "family", "ladder", "scenefusion",
                                    "scenevit"])
def test_unknown_task(servables: dict[str, ServableModel], family: str) -> None:
    model = servables[family]
    inputs = model.examples("val", model.tasks()[0], limit=1)[0].inputs
    with pytest.raises(InputError, match="^task"):
        model.decode(inputs, "no-such-task")


@pytest.mark.parametrize(("field", "value", "message"), [
    ("audio", "1,2,3", "audio"),
    ("audio", [0.0] * 511, "audio: expected 512"),
    ("audio", [0.0] * 513, "audio: expected 512"),
    ("audio", [0.0] * 511 + [math.nan], "audio: item 511 is not finite"),
    ("audio", [math.inf] + [0.0] * 511, "audio: item 0 is not finite"),
    ("audio", [0.0] * 511 + ["1"], "audio: item 511 is str"),
    ("audio", [True] + [0.0] * 511, "audio: item 0 is bool"),
    ("audio", [1e39] + [0.0] * 511, "audio"),
    ("text", 17, "text: expected a string"),
    ("text", "   ", "text: empty"),
    ("text", "word " * 17, "text: 17 words"),
    ("image", b"bytes", "image: expected a base64 string"),
])
@FUSION_FAMILIES
def test_fusion_field_errors(servables: dict[str, ServableModel], field: str, value: Any,
                             message: str, family: str) -> None:
    inputs = _fusion_inputs(servables, family)
    inputs[field] = value
    with pytest.raises(InputError) as err:
        servables[family].decode(inputs, "digits")
    assert str(err.value).startswith(message)


@pytest.mark.parametrize("missing", ["image", "audio", "text"])
@FUSION_FAMILIES
def test_fusion_requires_every_modality(servables: dict[str, ServableModel],
                                        missing: str, family: str) -> None:
    inputs = _fusion_inputs(servables, family)
    del inputs[missing]
    with pytest.raises(InputError, match=f"^{missing}: missing"):
        servables[family].decode(inputs, "digits")


@FUSION_FAMILIES
def test_fusion_unknown_modality(servables: dict[str, ServableModel], family: str) -> None:
    inputs = _fusion_inputs(servables, family)
    inputs["video"] = "x"
    with pytest.raises(InputError, match="^video: unknown modality"):
        servables[family].decode(inputs, "digits")


def test_fusion_decode_round_trip(servables: dict[str, ServableModel]) -> None:
    inputs = _fusion_inputs(servables)
    out = servables["fusion"].decode(inputs, "digits")
    assert out["image"].shape == (1, 8, 16)
    assert torch.equal(out["audio"], torch.tensor(inputs["audio"], dtype=torch.float32))
    assert out["text"].dtype == torch.long and len(out["text"]) == len(inputs["text"].split())
    # unknown words are tolerated (mapped to <unk>), integers are valid audio samples
    inputs["text"] = "hello top-left high"
    inputs["audio"] = [0] * 512
    out = servables["fusion"].decode(inputs, "digits")
    assert out["text"].tolist()[0] == 1


def test_examples_rejects_train_split(servables: dict[str, ServableModel]) -> None:
    for model in servables.values():
        with pytest.raises(ValueError):
            model.examples("train", model.tasks()[0], limit=1)


def test_scene_fusion_reads_the_scene_at_its_side(servables: dict[str, ServableModel]) -> None:
    """A 96x96 scene (or any size) is resized to what the family was trained on."""
    for family, side in (("scenefusion", 64), ("scenevit", 96)):
        model = servables[family]
        inputs = dict(model.examples("val", "digits", limit=1)[0].inputs)
        assert decode_image(inputs["image"], "image", 96, 96).shape == (1, 96, 96)
        assert model.decode(inputs, "digits")["image"].shape == (1, side, side)
        inputs["image"] = image_b64(size=(40, 23), color=(10, 200, 30))
        assert model.decode(inputs, "digits")["image"].shape == (1, side, side)
