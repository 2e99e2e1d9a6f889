"""Qwen2-VL / Qwen2.5-VL and LLaVA-NeXT directories (tiny, random-init, built locally from the
real config classes: deployments/models/vlm/tiny_qwen_vl.py, tiny_llava_tiled.py) served through
the real app, each run a process of its own on its own local Ray
(tests/integration/adapter_app_run.py, ~1-3 minutes each): vLLM disaggregated (the encoder
stage runs Qwen's vision tower alone and hands vLLM image_embeds + image_grid_thw), and the
transformers engine disaggregated (LLaVA-NeXT's tiled images: one [tokens, hidden] each, of
different sizes, through the object store). A greedy request with two images of different
sizes answers the same text as transformers' own generate on the same prompt, and
`usage.prompt_tokens` is the adapter's count (each image's tokens from its size)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deployments.models.vlm.tiny_llava_tiled import build_tiny_llava_tiled
from deployments.models.vlm.tiny_qwen_vl import build_tiny_qwen_vl
from tests.helpers.app_process import run_module
from tests.integration.adapter_app_run import SIZES, TEXT, pictures

pytestmark = [pytest.mark.integration, pytest.mark.slow]
# The monolith takes the images as the engine tests give them (PIL: test_qwen_vl_engines.py,
# test_llava_tiled_engines.py) through the app path test_chat_only_app.py runs: not repeated
# here (CI's time). OneVision is left to the engine test: its transformers processor does not
# tile the images of a several-image prompt, so it is no reference for this request. vLLM
# takes no LLaVA-NeXT embeddings (refused at build: test_tiled_llava.py).
RUNS = [("qwen2_vl", "vllm", "disaggregated"), ("qwen2_5_vl", "transformers", "disaggregated"),
        ("llava_next", "transformers", "disaggregated")]


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    dirs = {t: build_tiny_qwen_vl(tmp_path_factory.mktemp(t), t) for t in ("qwen2_vl",
                                                                           "qwen2_5_vl")}
    return {**dirs, "llava_next": build_tiny_llava_tiled(tmp_path_factory.mktemp("next"))}


def served(model_dir: Path, engine: str, mode: str, out: Path) -> dict[str, Any]:
    return run_module("tests.integration.adapter_app_run",
                      [str(model_dir), engine, mode, str(out)], out)


def reference(model_dir: Path, with_images: bool) -> tuple[str, int]:
    """(text of 6 greedy tokens, prompt tokens) of transformers' generate on the processor's
    inputs for the run's request."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32).eval()
    content: list[dict[str, Any]] = [{"type": "image"}] * (2 if with_images else 0)
    messages = [{"role": "user", "content": [*content, {"type": "text", "text": TEXT}]}]
    prompt = processor.apply_chat_template(messages, add_generation_prompt=True)
    inputs = processor(text=[prompt], images=pictures() if with_images else None,
                       return_tensors="pt")
    model.generation_config.eos_token_id = None  # as the request's ignore_eos
    out = model.generate(**inputs, max_new_tokens=6, do_sample=False)
    n = inputs["input_ids"].shape[1]
    return processor.tokenizer.decode(out[0, n:], skip_special_tokens=True), n


@pytest.mark.parametrize(("model_type", "engine", "mode"), RUNS)
def test_served_answers_are_the_models_own(model_dirs: dict[str, Path], model_type: str,
                                           engine: str, mode: str,
                                           tmp_path: Path) -> None:
    from deployments.engines.model_dir import read_model_dir

    model_dir = model_dirs[model_type]
    run = served(model_dir, engine, mode, tmp_path / "run.json")
    assert ("ImageEncoder" in run["deployments"]) == (mode == "disaggregated"), run
    facts = read_model_dir(model_dir)
    image_tokens = [facts.tokens_for(*size) for size in SIZES]
    assert image_tokens == {"llava_next": [192, 186]}.get(model_type, [8, 54])
    for key, with_images in (("images", True), ("text", False)):
        answer = run[key]
        assert answer["status"] == 200, answer
        text, prompt_tokens = reference(model_dir, with_images)
        body = answer["body"]
        assert body["choices"][0]["message"]["content"] == text, (key, body, text)
        usage = body["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"]) == (prompt_tokens, 6), (
            key, usage)
