"""Which adapter serves a model directory, from its config.json alone
(deployments/engines/architectures.py)."""

from __future__ import annotations

import pytest

from deployments.engines.architectures import SUPPORTED, model_facts

LLAVA = {"model_type": "llava", "image_token_index": 3,
         "vision_config": {"image_size": 56, "patch_size": 14},
         "text_config": {"hidden_size": 128, "max_position_embeddings": 256}}


def test_llava_images_are_a_fixed_number_of_tokens() -> None:
    f = model_facts(LLAVA)
    assert (f.adapter, f.image_token_id, f.tokens_per_image, f.max_position) == ("llava", 3, 16,
                                                                               256)
    assert model_facts({**LLAVA, "image_seq_length": 576}).tokens_per_image == 576
    assert f.takes_images


def test_a_text_only_llm_takes_no_images() -> None:
    f = model_facts({"model_type": "qwen2", "hidden_size": 896,
                     "max_position_embeddings": 32768})
    assert (f.adapter, f.takes_images, f.tokens_per_image, f.text_hidden) == (
        "causal_lm", False, 0, 896)


def test_an_architecture_without_an_adapter_names_the_supported_ones() -> None:
    with pytest.raises(ValueError, match="model_type 'idefics3' has no adapter") as err:
        model_facts({"model_type": "idefics3"}, "m/config.json")
    assert all(t in str(err.value) for t in SUPPORTED)


def test_a_llava_config_missing_its_parts_says_which() -> None:
    with pytest.raises(ValueError, match="needs image_token_id, text_config and vision_config"):
        model_facts({"model_type": "llava", "text_config": {"hidden_size": 8}})


QWEN2_VL = {"model_type": "qwen2_vl", "image_token_id": 151655, "hidden_size": 1536,
            "max_position_embeddings": 32768,
            "vision_config": {"patch_size": 14, "spatial_merge_size": 2}}
QWEN_PRE = {"min_pixels": 3136, "max_pixels": 12845056, "patch_size": 14, "merge_size": 2}


@pytest.mark.parametrize("model_type", ["qwen2_vl", "qwen2_5_vl"])
def test_qwen_vl_tokens_follow_the_image_size(model_type: str) -> None:
    """Published checkpoints (text sizes at the top level) and transformers 5's (under
    text_config) read alike; tokens per image as Qwen2VLImageProcessor resizes it."""
    flat = model_facts({**QWEN2_VL, "model_type": model_type}, preprocessor=QWEN_PRE)
    nested = model_facts({"model_type": model_type, "image_token_id": 151655,
                          "vision_config": {"patch_size": 14, "spatial_merge_size": 2},
                          "text_config": {"hidden_size": 1536,
                                          "max_position_embeddings": 32768}},
                         preprocessor={"size": {"shortest_edge": 3136,
                                                "longest_edge": 12845056}})
    assert flat == nested
    assert (flat.adapter, flat.image_token_id, flat.text_hidden) == ("qwen_vl", 151655, 1536)
    assert flat.tokens_for(28, 28) == 4  # min_pixels: 56x56
    assert flat.tokens_for(448, 448) == 256 and flat.tokens_for(60, 100) == 2 * 4
    assert flat.tokens_per_image == 12845056 // 28 ** 2  # the most an image takes


@pytest.mark.parametrize("size", [(28, 28), (60, 100), (1000, 30), (333, 777), (5000, 4000),
                                  (4, 700)])
def test_qwen_vl_resizes_as_transformers_does(size: tuple[int, int]) -> None:
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    facts = model_facts(QWEN2_VL, preprocessor={"min_pixels": 3136, "max_pixels": 200704})
    assert facts.image_grid is not None
    width, height = size
    assert facts.image_grid.resized(width, height) == smart_resize(
        height, width, factor=28, min_pixels=3136, max_pixels=200704)


def test_llava_tokens_do_not_follow_the_image_size() -> None:
    assert model_facts(LLAVA).tokens_for(1000, 20) == 16


def test_qwen_vl_refusals_name_the_problem() -> None:
    facts = model_facts(QWEN2_VL, preprocessor=QWEN_PRE)
    with pytest.raises(ValueError, match="aspect ratio must be under 200"):
        facts.tokens_for(1000, 4)
    with pytest.raises(ValueError, match="needs image_token_id, hidden_size and vision_config"):
        model_facts({"model_type": "qwen2_5_vl", "hidden_size": 8})
    with pytest.raises(ValueError, match="leave no image size"):
        model_facts(QWEN2_VL, preprocessor={"min_pixels": 4000, "max_pixels": 3000})
