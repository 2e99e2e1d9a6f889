"""Qwen2-VL and Qwen2.5-VL (tiny random-init directories built locally from the real config
classes, deployments/models/vlm/tiny_qwen_vl.py) on both engines: the same greedy tokens as transformers'
own `generate` on the processor's inputs, with pixels (monolith) and with the encoder stage's
`GridEmbeds` (vLLM takes `image_embeds` + `image_grid_thw`), for images of different sizes;
and each engine's prompt count is the adapter's (what the ingress counts, what vLLM reports).
vLLM starts its own processes (~40-90 s on CPU), once per model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deployments.models.vlm.tiny_qwen_vl import build_tiny_qwen_vl
from tests.helpers.engine_runs import both_engines, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]
vllm = pytest.importorskip("vllm")

SIZES = ((60, 100), (300, 200), (28, 28))  # (width, height): 8, 54 and 4 tokens


def messages(num_images: int) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "image"}] * num_images
    return [{"role": "user", "content": [*parts, {"type": "text", "text": "which digit is this?"}]}]


def images(num: int) -> list[Any]:
    from PIL import Image

    colours = ((200, 10, 10), (10, 200, 30), (90, 90, 250))
    return [Image.new("RGB", SIZES[k], colours[k]) for k in range(num)]


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen2_5_vl"])
def qwen(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    model_dir = build_tiny_qwen_vl(tmp_path_factory.mktemp(request.param), request.param)
    for hf, vl, loop in both_engines(model_dir, 512):
        yield model_dir, hf, vl, loop


def reference(model_dir: Path, num_images: int, max_tokens: int) -> tuple[str, list[int], int]:
    """(prompt, greedy tokens, prompt length) of transformers' own generate on the
    processor's inputs."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32).eval()
    prompt = processor.apply_chat_template(messages(num_images), add_generation_prompt=True)
    inputs = processor(text=[prompt], images=images(num_images) or None, return_tensors="pt")
    model.generation_config.eos_token_id = None  # as the engines' ignore_eos: max_tokens
    out = model.generate(**inputs, max_new_tokens=max_tokens, do_sample=False)
    n = inputs["input_ids"].shape[1]
    return prompt, out[0, n:].tolist(), n


def test_same_greedy_tokens_as_transformers_generate(qwen: Any) -> None:
    from deployments.engines.image_inputs import image_tokens
    from deployments.engines.model_dir import read_model_dir
    from deployments.engines.qwen_vl import QwenVisionTower

    model_dir, hf, vl, loop = qwen
    facts = read_model_dir(model_dir)
    tower = QwenVisionTower(model_dir)
    for num in (0, 1, 3):
        prompt, ref, n = reference(model_dir, num, 8)
        pixels = tuple(images(num))
        assert hf.prompt_tokens(prompt, image_tokens(facts, pixels)) == n
        assert vl.prompt_tokens(prompt, image_tokens(facts, pixels)) == n
        got = {"hf pixels": loop.run_until_complete(run(hf, f"hp{num}", prompt, pixels)),
               "vllm pixels": loop.run_until_complete(run(vl, f"vp{num}", prompt, pixels))}
        if num:
            embeds = tuple(tower.encode(pixels))
            assert [e.tokens for e in embeds] == list(image_tokens(facts, pixels))
            got["hf embeds"] = loop.run_until_complete(run(hf, f"he{num}", prompt, embeds))
            got["vllm embeds"] = loop.run_until_complete(run(vl, f"ve{num}", prompt, embeds))
        assert got == {k: (ref, n) for k in got}, (num, ref)
