"""LLaVA-NeXT / LLaVA-OneVision's anyres tiling counted by the adapter alone (config.json, no
torch: deployments/engines/tiled_grid.py) as transformers' processors expand the placeholder,
on the tiny directories (deployments/models/vlm/tiny_llava_tiled.py) and on the published
LLaVA-NeXT-7B geometry; and the app refusing what vLLM 0.32 cannot serve with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deployments.engines.architectures import model_facts, read_facts
from deployments.models.vlm.tiny_llava_tiled import MODEL_TYPES, build_tiny_llava_tiled

SIZES = [(28, 28), (60, 100), (300, 200), (200, 30), (500, 500), (13, 90), (90, 13),
         (1000, 7), (57, 57), (84, 29), (1153, 944)]


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {t: build_tiny_llava_tiled(tmp_path_factory.mktemp(t), t) for t in MODEL_TYPES}


def processor_count(model_dir: Path, size: tuple[int, int]) -> int:
    from PIL import Image
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "?"}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True)
    x = processor(text=[prompt], images=[Image.new("RGB", size)], return_tensors="pt")
    return int((x["input_ids"] == read_facts(model_dir).image_token_id).sum())


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_tokens_per_image_are_the_processors(model_dirs: dict[str, Path],
                                             model_type: str) -> None:
    facts = read_facts(model_dirs[model_type])
    assert facts.adapter == "llava_tiled"
    counts = {s: facts.tokens_for(*s) for s in SIZES}
    assert counts == {s: processor_count(model_dirs[model_type], s) for s in SIZES}
    assert facts.tokens_per_image >= max(counts.values())  # the bound the stages plan with
    if model_type == "llava_onevision":  # 500x500 fills 4x4 tiles: pooled (anyres_max_9)
        assert counts[(500, 500)] < 16 * 16 + 16


LLAVA_NEXT_7B = {  # llava-hf/llava-v1.6-mistral-7b-hf's config.json, the parts read
    "model_type": "llava_next", "image_token_index": 32000,
    "image_grid_pinpoints": [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]],
    "vision_feature_select_strategy": "default",
    "vision_config": {"model_type": "clip_vision_model", "image_size": 336, "patch_size": 14},
    "text_config": {"hidden_size": 4096, "max_position_embeddings": 32768}}


def test_published_llava_next_geometry_counts_as_its_processor() -> None:
    from transformers import LlavaNextProcessor

    facts = model_facts(LLAVA_NEXT_7B)
    ref: Any = LlavaNextProcessor.__new__(LlavaNextProcessor)
    ref.patch_size, ref.vision_feature_select_strategy = 14, "default"
    ref.num_additional_image_tokens = 1
    ref.image_processor = type("P", (), {
        "image_grid_pinpoints": LLAVA_NEXT_7B["image_grid_pinpoints"],
        "crop_size": {"height": 336, "width": 336}, "size": {"shortest_edge": 336}})()
    for w, h in [(336, 336), (640, 480), (1024, 768), (200, 1000), (1920, 1080)]:
        # the processor drops the class token ("default") after counting
        assert facts.tokens_for(w, h) == ref._get_number_of_features(h, w, 336, 336) - 1, (w, h)
    assert facts.tokens_for(672, 672) == 576 + 48 * 48 + 48  # base + 2x2 tiles + newlines


def test_a_tiled_config_missing_its_grid_says_so() -> None:
    with pytest.raises(ValueError, match="needs image_grid_pinpoints"):
        model_facts({**LLAVA_NEXT_7B, "image_grid_pinpoints": None})


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_vllm_disaggregated_is_refused_at_build_and_the_rest_bind(
        model_dirs: dict[str, Path], model_type: str) -> None:
    from app.chat_graph import bind_chat
    from deployments.generation.model_files import ModelDir
    from deployments.ingress.chat.config import GenerationConfig

    model = ModelDir.at(model_dirs[model_type], "tiled")
    with pytest.raises(ValueError, match="mode: monolith on vLLM"):
        bind_chat(GenerationConfig(engine="vllm", mode="disaggregated"), model, lambda o: o)
    assert bind_chat(GenerationConfig(engine="vllm", mode="monolith"), model,
                     lambda o: o).encoder is None
    assert bind_chat(GenerationConfig(engine="transformers", mode="disaggregated"), model,
                     lambda o: o).encoder is not None
