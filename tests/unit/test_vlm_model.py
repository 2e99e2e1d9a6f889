"""The VLM's model directory (deployments/models/vlm): built, trained and cached by
`ensure_vlm`, loaded by transformers (model, processor, tokenizer), generating, and the encoder
stage's embeddings. A tiny config keeps this fast; the shipped model's accuracy is checked in
test_vlm_accuracy.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from deployments.models.vlm import data as vlm_data
from deployments.models.vlm import (
    encode_images,
    ensure_vlm,
    image_embeddings,
    load_model,
    load_processor,
    prompt_text,
    read_meta,
    task_messages,
)
from deployments.models.vlm.cache import is_current, weights_digest
from deployments.models.vlm.config import VlmConfig
from deployments.models.vlm.evaluate import greedy_answers
from deployments.models.vlm.fit import fit
from deployments.models.vlm.model import pixel_values
from deployments.models.vlm.tokenizer import build_tokenizer
from tests.conftest import TINY_VLM

TINY = TINY_VLM  # the session's tiny VLM (tests/conftest.py), which the chat path's tests serve


@pytest.fixture(scope="module")
def tiny_dir(tiny_vlm_dir: Path) -> Path:
    torch.set_num_threads(1)
    return tiny_vlm_dir


def test_directory_holds_what_both_engines_read(tiny_dir: Path) -> None:
    names = {p.name for p in tiny_dir.iterdir()}
    assert {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
            "tokenizer_config.json", "preprocessor_config.json", "processor_config.json",
            "vlm.json"} <= names
    config = json.loads((tiny_dir / "config.json").read_text())
    assert config["image_seq_length"] == TINY.vision.tokens_per_image == 16
    assert config["vision_feature_layer"] == -1
    with safe_open(str(tiny_dir / "model.safetensors"), "pt") as handle:
        names = list(handle.keys())
    tower = [k for k in names if k.startswith("vision_tower.")]
    assert tower and all(k.startswith("vision_tower.vision_model.") for k in tower)
    meta = read_meta(tiny_dir)
    assert meta is not None and set(meta["held_out_accuracy"]) == {"digit", "sequence",
                                                                   "arithmetic"}


def test_second_call_loads_from_the_cache(tiny_dir: Path) -> None:
    before = (tiny_dir / "vlm.json").stat().st_mtime_ns
    assert ensure_vlm(tiny_dir.parent, TINY) == tiny_dir
    assert (tiny_dir / "vlm.json").stat().st_mtime_ns == before  # not trained again
    assert is_current(tiny_dir, TINY) and not is_current(tiny_dir, VlmConfig())


def test_transformers_loads_and_generates_like_the_training_path(tiny_dir: Path) -> None:
    model, processor = load_model(tiny_dir), load_processor(tiny_dir)
    splits = vlm_data.digit_splits(TINY.data)
    images = vlm_data.render(splits["test"].images[:3], 56, TINY.data)
    pil = [vlm_data.to_pil(img) for img in images]
    prompt = processor.apply_chat_template(task_messages("sequence", 3), tokenize=False,
                                           add_generation_prompt=True)
    assert prompt == prompt_text(processor.tokenizer, "read the digits", 3)
    inputs = processor(text=prompt, images=pil, return_tensors="pt")
    assert int((inputs["input_ids"] == model.config.image_token_id).sum()) == 3 * 16
    out = model.generate(**inputs, do_sample=False, max_new_tokens=4)
    text = processor.tokenizer.decode(out[0, inputs["input_ids"].shape[1]:],
                                      skip_special_tokens=True).strip()
    example = vlm_data.Example("sequence", "read the digits", "", (0, 1, 2))
    cfg = TINY
    assert greedy_answers(model, build_tokenizer(), cfg, [example], images)[0].startswith(text)


def test_embeddings_shape_and_order(tiny_dir: Path) -> None:
    model, processor = load_model(tiny_dir), load_processor(tiny_dir)
    splits = vlm_data.digit_splits(TINY.data)
    images = vlm_data.render(splits["test"].images[:5], 56, TINY.data)
    pil = [vlm_data.to_pil(img) for img in images]
    emb = image_embeddings(model, processor, pil)
    assert emb.shape == (5, 16, TINY.text.hidden_size)
    with torch.no_grad():
        assert torch.allclose(emb, encode_images(model, pixel_values(images)), atol=1e-5)
        reversed_emb = image_embeddings(model, processor, pil[::-1])
    assert torch.allclose(reversed_emb, emb.flip(0), atol=1e-5)


def test_training_is_deterministic(tiny_dir: Path) -> None:
    tok = build_tokenizer()
    meta = read_meta(tiny_dir)
    assert meta is not None
    assert weights_digest(fit(TINY, tok).model) == meta["weights_digest"]


def test_task_messages_validate() -> None:
    assert task_messages("arithmetic", a=2, b=3)[0]["content"] == [
        {"type": "text", "text": "what is two plus three?"}]
    with pytest.raises(ValueError, match="valid"):
        task_messages("poetry")
    with pytest.raises(ValueError, match="one image"):
        task_messages("digit", num_images=2)
