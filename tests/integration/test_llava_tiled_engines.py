"""LLaVA-NeXT and LLaVA-OneVision (tiny random-init directories built locally from the real
config classes, deployments/models/vlm/tiny_llava_tiled.py) on both engines: the same greedy
tokens as transformers' own `generate` on the processor's inputs for one image of each size
(OneVision's pooled grid included), on pixels (both engines: the monolith) and on the encoder
stage's embeddings (the transformers engine); for several images of different sizes, the
engines agree; each engine's prompt count is the adapter's (`TiledGrid`). vLLM 0.32 refuses
the embeddings with a clear error and keeps serving (mixed sizes in one batch would stop its
engine core). vLLM starts its own processes (~40-90 s on CPU), once per model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from deployments.models.vlm.tiny_llava_tiled import MODEL_TYPES, build_tiny_llava_tiled
from tests.helpers.engine_runs import both_engines, run

pytestmark = [pytest.mark.integration, pytest.mark.slow]
vllm = pytest.importorskip("vllm")

# (width, height): fitted to 56x56 (LLaVA-NeXT 192 tokens), 84x56 and a single tile;
# 500x500 is fitted to 4x4 tiles, which OneVision pools (288 tokens on NeXT, 172 pooled)
SIZES = ((60, 100), (300, 200), (28, 28), (500, 500))
COLOURS = ((200, 10, 10), (10, 200, 30), (90, 90, 250), (30, 30, 30))


def messages(num_images: int) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "image"}] * num_images
    return [{"role": "user", "content": [*parts, {"type": "text", "text": "which digit is this?"}]}]


def images(sizes: tuple[tuple[int, int], ...]) -> tuple[Any, ...]:
    from PIL import Image

    return tuple(Image.new("RGB", s, c) for s, c in zip(sizes, COLOURS, strict=False))


@pytest.fixture(scope="module", params=MODEL_TYPES)
def tiled(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    model_dir = build_tiny_llava_tiled(tmp_path_factory.mktemp(request.param), request.param)
    for hf, vl, loop in both_engines(model_dir, 1024):
        yield model_dir, hf, vl, loop


def reference(model_dir: Path, size: tuple[int, int] | None) -> tuple[str, list[int], int]:
    """(prompt, 8 greedy tokens, prompt length) of transformers' own generate on the processor's
    inputs, for one image of `size` or none."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir)
    model = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32).eval()
    prompt = processor.apply_chat_template(messages(0 if size is None else 1),
                                           add_generation_prompt=True)
    pictures = None if size is None else list(images((size,)))
    inputs = processor(text=[prompt], images=pictures, return_tensors="pt")
    model.generation_config.eos_token_id = None  # as the engines' ignore_eos: max_tokens
    out = model.generate(**inputs, max_new_tokens=8, do_sample=False)
    n = inputs["input_ids"].shape[1]
    return prompt, out[0, n:].tolist(), n


def served(tiled: Any, key: str, prompt: str, pictures: tuple[Any, ...]
           ) -> dict[str, tuple[list[int], int | None]]:
    """Both engines' tokens on pixels, and (with images) the transformers engine's on the
    encoder stage's embeddings."""
    from deployments.engines.image_inputs import image_tokens
    from deployments.engines.llava_tiled import TiledVisionTower
    from deployments.engines.model_dir import read_model_dir

    model_dir, hf, vl, loop = tiled
    got = {"hf pixels": loop.run_until_complete(run(hf, f"hp{key}", prompt, pictures)),
           "vllm pixels": loop.run_until_complete(run(vl, f"vp{key}", prompt, pictures))}
    if pictures:
        embeds = tuple(TiledVisionTower(model_dir).encode(pictures))
        facts = read_model_dir(model_dir)
        assert [int(e.shape[0]) for e in embeds] == list(image_tokens(facts, pictures))
        got["hf embeds"] = loop.run_until_complete(run(hf, f"he{key}", prompt, embeds))
    return got


def test_one_image_gives_transformers_generates_tokens(tiled: Any) -> None:
    from deployments.engines.image_inputs import image_tokens
    from deployments.engines.model_dir import read_model_dir

    model_dir, hf, vl, _ = tiled
    facts = read_model_dir(model_dir)
    for k, size in enumerate((None, *SIZES)):
        prompt, ref, n = reference(model_dir, size)
        pictures = () if size is None else images((size,))
        assert hf.prompt_tokens(prompt, image_tokens(facts, pictures)) == n
        assert vl.prompt_tokens(prompt, image_tokens(facts, pictures)) == n
        got = served(tiled, str(k), prompt, pictures)
        assert got == {key: (ref, n) for key in got}, (size, ref)


def test_images_of_different_sizes_agree_across_engines(tiled: Any) -> None:
    from deployments.engines.image_inputs import image_tokens
    from deployments.engines.model_dir import read_model_dir

    model_dir, hf, _, _ = tiled
    pictures = images(SIZES[:3])
    prompt = hf._tok.apply_chat_template(messages(3), add_generation_prompt=True, tokenize=False)
    counts = image_tokens(read_model_dir(model_dir), pictures)
    assert len(set(counts)) == 3  # three sizes, three token counts
    got = served(tiled, "multi", prompt, pictures)
    first = got["hf pixels"]
    assert first[1] == hf.prompt_tokens(prompt, counts)
    assert got == {key: first for key in got}


def test_vllm_refuses_embeddings_and_keeps_serving(tiled: Any) -> None:
    from deployments.engines.base import EngineError
    from deployments.engines.llava_tiled import TiledVisionTower

    model_dir, _, vl, loop = tiled
    prompt, ref, n = reference(model_dir, SIZES[2])
    embeds = tuple(TiledVisionTower(model_dir).encode(images((SIZES[2],))))
    with pytest.raises(EngineError, match="monolith"):
        loop.run_until_complete(run(vl, "refused", prompt, embeds))
    assert loop.run_until_complete(run(vl, "after", prompt, images((SIZES[2],)))) == (ref, n)
