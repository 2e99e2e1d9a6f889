"""Qwen2-VL / Qwen2.5-VL images take tokens by their size (dynamic resolution): the ingress's
renderer counts each image as the adapter says, which is the count transformers' own processor
expands the prompt to; the pipeline hands those counts to the encoder and LLM routers and the
LLM stage's autoscaling meter (deployments/generation/pipeline.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from deployments.generation.model_files import ModelDir
from deployments.generation.pipeline import ChatJob, GenerationPipeline
from deployments.generation.prompt import PromptRenderer
from deployments.generation.stage_messages import GenerateCall, ImageCall
from deployments.models.vlm.tiny_qwen_vl import build_tiny_qwen_vl

MESSAGES = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "what is"},
                                         {"type": "image"},
                                         {"type": "text", "text": "which digit is this?"}]}]
SIZES = ((60, 100), (300, 200))  # (width, height)


@pytest.fixture(scope="module", params=["qwen2_vl", "qwen2_5_vl"])
def qwen_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen_vl(tmp_path_factory.mktemp(request.param), request.param)


def test_the_renderer_counts_what_the_processor_expands(qwen_dir: Path) -> None:
    from PIL import Image
    from transformers import AutoProcessor

    renderer = PromptRenderer(ModelDir.at(qwen_dir, "qwen"))
    processor = AutoProcessor.from_pretrained(qwen_dir)
    prompt = renderer.render(MESSAGES)
    assert prompt == processor.apply_chat_template(MESSAGES, add_generation_prompt=True)
    images = [Image.new("RGB", size) for size in SIZES]
    expanded = processor(text=[prompt], images=images, return_tensors="pt")
    tokens = tuple(renderer.tokens_for(w, h) for w, h in SIZES)
    assert tokens == (2 * 4, 9 * 6)  # 60x100 -> 56x112; 300x200 -> 252x168 (under max_pixels)
    assert [int(t * h * w) // 4 for t, h, w in expanded["image_grid_thw"]] == list(tokens)
    assert renderer.count(prompt, tokens) == expanded["input_ids"].shape[1]


class _Encoder:
    def __init__(self) -> None:
        self.calls: list[ImageCall] = []
        self.encode = self

    def remote(self, call: ImageCall) -> Any:
        from deployments.generation.stage_messages import EncodedImage

        self.calls.append(call)

        async def answer() -> EncodedImage:
            return EncodedImage("ok", (f"ref-{call.index}",), call.route_tokens)
        return answer()


class _LLM:
    def __init__(self) -> None:
        self.calls: list[GenerateCall] = []
        self.generate = self

    def options(self, **_: Any) -> _LLM:
        return self

    def remote(self, call: GenerateCall, images: list[Any]) -> Any:
        from deployments.generation.stage_messages import GenChunk

        self.calls.append(call)

        async def stream() -> Any:
            yield GenChunk(finished=True, finish_reason="stop")
        return stream()


def test_the_pipeline_routes_by_each_images_own_tokens() -> None:
    encoder, llm = _Encoder(), _LLM()
    pipe = GenerationPipeline(llm, encoder, 4096, fan_out=2)
    job = ChatJob("r1", "p", 120, (b"a", b"b", b"c"), 4, 0.0, 1e12, image_tokens=(8, 77, 4))

    async def go() -> None:
        async for _ in pipe.run(job):
            pass
    asyncio.run(go())
    assert [c.route_tokens for c in encoder.calls] == [8 + 77, 4]
    [call] = llm.calls
    assert (call.image_tokens, call.route_tokens, call.num_images) == (89, 120, 3)
    text_only = GenerationPipeline(llm, None, 4096, count_image_tokens=False).call_of(job)
    assert text_only.route_tokens == 120 - 89
