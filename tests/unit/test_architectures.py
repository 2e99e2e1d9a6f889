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
    with pytest.raises(ValueError, match="model_type 'qwen2_vl' has no adapter") as err:
        model_facts({"model_type": "qwen2_vl"}, "m/config.json")
    assert all(t in str(err.value) for t in SUPPORTED)


def test_a_llava_config_missing_its_parts_says_which() -> None:
    with pytest.raises(ValueError, match="needs image_token_id, text_config and vision_config"):
        model_facts({"model_type": "llava", "text_config": {"hidden_size": 8}})
