"""Where a chat request's time to its first chunk went (deployments/generation/pipeline.py
`StageTiming`, the ingress's `adaptserve_chat_stage_seconds`): the real pipeline and metrics,
the stage handles faked (Serve's handles are not ours) with known delays."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from deployments.generation.pipeline import ChatJob, GenerationPipeline, StageTiming
from deployments.generation.stage_messages import EncodedImage, GenChunk, ImageCall
from deployments.ingress.metrics import IngressMetrics


class _Encoder:
    """An encoder handle answering each group after `delay_s`, having been busy `busy_ms`."""

    def __init__(self, delay_s: float, busy_ms: list[float]) -> None:
        self.delay_s, self.busy_ms, self.calls = delay_s, busy_ms, 0
        self.in_flight = self.most_in_flight = 0
        self.encode = self

    def remote(self, call: ImageCall) -> Any:
        busy = self.busy_ms[self.calls % len(self.busy_ms)]
        self.calls += 1

        async def answer() -> EncodedImage:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            await asyncio.sleep(self.delay_s)
            self.in_flight -= 1
            return EncodedImage("ok", (f"ref-{call.index}",), 16, encode_ms=busy)
        return answer()


class _LLM:
    """An LLM handle whose stream starts after `delay_s`."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.generate = self

    def options(self, **_: Any) -> _LLM:
        return self

    def remote(self, *_: Any) -> AsyncIterator[GenChunk]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[GenChunk]:
        await asyncio.sleep(self.delay_s)
        yield GenChunk("seven")
        yield GenChunk(finished=True, finish_reason="stop")


def job(images: int) -> ChatJob:
    return ChatJob("r1", "prompt", 40, tuple(b"png" for _ in range(images)), 4, 0.0, 1e12)


def run(pipeline: GenerationPipeline, images: int) -> list[GenChunk]:
    async def go() -> list[GenChunk]:
        return [c async for c in pipeline.run(job(images))]
    return asyncio.run(go())


def test_disaggregated_timing_splits_encoding_from_the_llm_call() -> None:
    seen: list[StageTiming] = []
    encoder = _Encoder(0.05, [4.0, 9.0])
    pipe = GenerationPipeline(_LLM(0.03), encoder, 16, fan_out=2, on_timing=seen.append)
    chunks = run(pipe, 3)
    assert [c.text for c in chunks] == ["seven", ""]
    [t] = seen  # once per request, at its first chunk
    assert (t.path, t.images) == ("disaggregated", 3)
    # lower bounds only (the loop's timers never fire early; a loaded machine is only slower)
    assert t.encode_s is not None and t.encode_s >= 0.045
    assert encoder.calls == 2 and encoder.most_in_flight == 2  # two groups in parallel
    assert t.encoder_busy_s == pytest.approx(0.009)  # the slower group
    assert t.first_chunk_s >= 0.025
    # text only: no encoder call, so no encode times
    run(pipe, 0)
    assert seen[1].encode_s is None and seen[1].encoder_busy_s is None


def test_monolith_timing_and_the_metrics_it_feeds() -> None:
    metrics = IngressMetrics()
    pipe = GenerationPipeline(_LLM(0.01), None, 16, on_timing=metrics.observe_chat_stages)
    run(pipe, 2)
    text = metrics.text()
    assert 'adaptserve_chat_stage_seconds_count{path="monolith",stage="first_chunk"} 1.0' in text
    assert 'stage="encode"' not in text
    disagg = GenerationPipeline(_LLM(0.0), _Encoder(0.0, [3.0]), 16,
                                on_timing=metrics.observe_chat_stages)
    run(disagg, 1)
    text = metrics.text()
    for stage in ("encode", "encoder_busy", "first_chunk"):
        assert (f'adaptserve_chat_stage_seconds_count{{path="disaggregated",stage="{stage}"}} '
                '1.0') in text


def test_a_failing_timing_hook_costs_no_answer() -> None:
    def broken(_: StageTiming) -> None:
        raise RuntimeError("metrics down")
    pipe = GenerationPipeline(_LLM(0.0), None, 16, on_timing=broken)
    assert [c.text for c in run(pipe, 0)] == ["seven", ""]


def test_the_benchmark_reads_stage_means_between_two_scrapes() -> None:
    from bench.experiments.generation_systems.metrics import stage_means_ms, stage_totals

    metrics = IngressMetrics()
    metrics.observe_chat_stages(StageTiming("disaggregated", 1, 0.010, 0.004, 0.020))
    before = stage_totals(metrics.text())
    assert before["disaggregated/encode"] == pytest.approx((0.010, 1.0))
    for enc, first in ((0.030, 0.010), (0.050, 0.030)):
        metrics.observe_chat_stages(StageTiming("disaggregated", 2, enc, 0.006, first))
    means = stage_means_ms(before, stage_totals(metrics.text()))
    assert means == pytest.approx({"disaggregated/encode": 40.0,
                                   "disaggregated/encoder_busy": 6.0,
                                   "disaggregated/first_chunk": 20.0})
    assert stage_totals("# no such series\nother_metric 1.0\n") == {}
