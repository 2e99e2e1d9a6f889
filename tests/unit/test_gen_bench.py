"""The generation benchmark's pure parts: the workload's shape, the client's accounting
(against a fake OpenAI streaming server: the servers it measures are not ours to fake) and
the figures."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass

import pytest
from aiohttp import web

from app.sim.traces.chat_spec import ChatTrafficSpec, ContextShape, burst_windows, image_count_probs
from bench.core.stream_client import Prepared, StreamState, open_loop
from bench.experiments.generation_systems.metrics import (
    RunStats,
    checks,
    knee,
    max_load_under_slo,
    run_stats,
)
from bench.experiments.generation_systems.serve_floor import ANSWER, FLOOR_KINDS, build, sse_chunks
from bench.workloads.chat import ExamplePool, make_workload
from tests.helpers.local_http import serve_posts

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
POOL = ExamplePool(tuple(WORDS[i % 10] for i in range(300)),
                   tuple((f"what is {a} plus {b}?", f"{a + b}") for a in range(5)
                         for b in range(5)))
SHAPE = ContextShape(context_len=256, tokens_per_image=18, base_prompt_tokens=12, turn_tokens=11)


def _long(**kw: object) -> ChatTrafficSpec:
    return ChatTrafficSpec(**{"rate_rps": 20.0, "duration_s": 600.0, "seed": 3, **kw})  # type: ignore[arg-type]


def test_same_seed_same_requests_other_seed_others() -> None:
    spec = ChatTrafficSpec(5.0, 30.0, seed=1)
    assert make_workload(spec, SHAPE, POOL) == make_workload(spec, SHAPE, POOL)
    assert make_workload(spec, SHAPE, POOL) != make_workload(ChatTrafficSpec(5.0, 30.0, seed=2),
                                                             SHAPE, POOL)


def test_image_counts_are_heavy_tailed_and_everything_fits_the_context() -> None:
    reqs = make_workload(_long(), SHAPE, POOL)
    sizes = [r.num_images for r in reqs if r.num_images]
    assert set(sizes) == set(range(1, 9))
    share = {n: sizes.count(n) / len(sizes) for n in range(1, 9)}
    assert share[1] + share[2] > 0.5
    assert share[6] + share[7] + share[8] < 0.1
    assert share[1] > share[2] > share[4] > share[8] > 0
    probs = image_count_probs(8, 1.5)
    assert math.isclose(probs.sum(), 1.0) and probs[0] > 0.4
    for r in reqs:
        used = (SHAPE.base_prompt_tokens + r.num_images * SHAPE.tokens_per_image
                + len(r.history) * SHAPE.turn_tokens + r.max_tokens)
        assert used <= SHAPE.context_len


def test_prompt_lengths_are_heavy_tailed() -> None:
    turns = [len(r.history) for r in make_workload(_long(), SHAPE, POOL)]
    zero = turns.count(0) / len(turns)
    assert 0.5 < zero < 0.8
    assert 0.0 < sum(1 for t in turns if t >= 4) / len(turns) < 0.15
    assert max(turns) >= 6


def test_image_bursts_raise_the_image_rate_not_the_text_rate() -> None:
    spec = _long(rate_rps=10.0, duration_s=2000.0)
    reqs = make_workload(spec, SHAPE, POOL)
    windows = burst_windows(spec, __import__("numpy").random.default_rng(spec.seed))
    inside = sum(e - s for s, e in windows)
    assert 0.08 < inside / spec.duration_s < 0.25
    img_in = sum(1 for r in reqs if r.num_images and r.in_burst) / inside
    img_out = sum(1 for r in reqs if r.num_images and not r.in_burst) / (spec.duration_s - inside)
    mean_img = spec.rate_rps * spec.image_share
    assert img_in == pytest.approx(spec.burst_factor * mean_img, rel=0.15)
    assert img_out < 0.8 * mean_img
    assert all(not r.in_burst for r in reqs if not r.num_images)
    text_in = sum(1 for r in reqs if not r.num_images
                  and any(s <= r.arrival_s < e for s, e in windows)) / inside
    assert text_in == pytest.approx(spec.rate_rps * (1 - spec.image_share), rel=0.2)
    total_img = sum(1 for r in reqs if r.num_images) / spec.duration_s
    assert total_img == pytest.approx(mean_img, rel=0.15)


def test_every_request_carries_its_expected_answer() -> None:
    reqs = make_workload(ChatTrafficSpec(5.0, 60.0, seed=4), SHAPE, POOL)
    assert [r.arrival_s for r in reqs] == sorted(r.arrival_s for r in reqs)
    for r in reqs:
        if r.task == "arithmetic":
            assert r.num_images == 0 and (r.question, r.answer) in POOL.facts
        elif r.task == "digit":
            assert r.num_images == 1 and r.answer == POOL.digit_words[r.image_ids[0]]
        else:
            assert r.num_images >= 2 and len(set(r.image_ids)) == r.num_images
            assert r.answer == " ".join(POOL.digit_words[i] for i in r.image_ids)
        assert all(h in POOL.facts for h in r.history)


def test_impossible_workloads_are_refused() -> None:
    with pytest.raises(ValueError, match="mean rate"):
        ChatTrafficSpec(1.0, 1.0, burst_factor=8.0, burst_fraction=0.2)
    with pytest.raises(ValueError, match="fit the context"):
        make_workload(ChatTrafficSpec(1.0, 10.0), ContextShape(100, 16, 10, 10), POOL)


def test_stream_state_reads_chunks_usage_done_and_errors() -> None:
    st = StreamState()
    for i, line in enumerate([b": comment\n", b"data: {\"choices\":[{\"delta\":{\"role\":"
                              b"\"assistant\",\"content\":\"\"}}]}\n", b"\n",
                              b"data: {\"choices\":[{\"delta\":{\"content\":\" three\"}}]}\n",
                              b"data: {\"choices\":[{\"delta\":{\"content\":\" one\"}}]}\n",
                              b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,"
                              b"\"completion_tokens\":3}}\n", b"data: [DONE]\n"]):
        st.feed(line, float(i))
    assert "".join(st.text) == " three one" and st.content_times == [3.0, 4.0]
    assert (st.prompt_tokens, st.completion_tokens, st.done, st.error) == (40, 3, True, "")
    assert st.first_token_time() == 3.0
    empty = StreamState()
    empty.feed(b'data: {"choices":[{"delta":{"content":""},"finish_reason":null}]}', 1.0)
    empty.feed(b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}', 2.0)
    assert empty.text == [] and empty.first_token_time() == 2.0
    bad = StreamState()
    bad.feed('data: {"error": {"message": "boom", "code": "deadline_exceeded"}}', 0.0)
    assert "deadline_exceeded" in bad.error


def test_serve_floor_streams_what_the_client_reads_as_one_answer() -> None:
    st = StreamState()
    for i, chunk in enumerate(sse_chunks("vlm", 123)):
        for line in chunk.splitlines():
            st.feed(line, float(i))
    assert ("".join(st.text), st.first_token_time(), st.done, st.error) == (ANSWER, 0.0, True, "")
    assert (st.prompt_tokens, st.completion_tokens) == (123, 1)
    with pytest.raises(ValueError, match="serve-floor-1hop"):
        build("serve-floor-3hop", "vlm")
    assert FLOOR_KINDS == ("serve-floor-1hop", "serve-floor-2hop")


RELEASE_SLOW = web.AppKey("release_slow", asyncio.Event)


async def _fake_openai(request: web.Request) -> web.StreamResponse:
    """ok / 503 / slow / cut / error by the request's question text; "slow" is held until the
    app's RELEASE_SLOW is set (when the client is done), so it outlasts any client timeout."""
    q = (await request.json())["messages"][-1]["content"][-1]["text"]
    if q == "refuse":
        return web.json_response({"error": {"message": "busy"}}, status=503)
    if q == "slow":
        await request.app[RELEASE_SLOW].wait()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for word in ("three", "one"):
        await asyncio.sleep(0.05)
        await resp.write(b'data: {"choices":[{"delta":{"content":" ' + word.encode() + b'"}}]}\n\n')
    if q == "cut":
        request.transport.close()  # type: ignore[union-attr]
        return resp
    if q == "error":
        await resp.write(b'data: {"error": {"message": "stage died"}}\n\n')
    await resp.write(b"data: [DONE]\n\n")
    return resp


def _prepared(i: int, q: str, t: float) -> Prepared:
    body = json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": q}]}]})
    return Prepared(i, t, body.encode(), "three one", "sequence", 2, 0, False)


def test_client_accounts_for_every_request() -> None:
    async def run() -> list:
        runner, url = await serve_posts({"/v1/chat/completions": _fake_openai})
        release = runner.app[RELEASE_SLOW] = asyncio.Event()
        kinds = ["ok", "refuse", "slow", "cut", "error", "ok"]
        try:  # timeout_s: "slow" never answers, so it must fire; for the rest, a hang guard
            return await open_loop(f"{url}/v1/chat/completions",
                                   [_prepared(i, k, 0.02 * i) for i, k in enumerate(kinds)],
                                   {"Content-Type": "application/json"}, timeout_s=5.0,
                                   start_delay_s=0.05)
        finally:
            release.set()
            await runner.cleanup()

    records = asyncio.run(run())
    assert [r.index for r in records] == list(range(6))
    assert [r.status for r in records] == ["ok", "http_503", "timeout", "transport",
                                           "stream_error", "ok"]
    good = records[0]
    # the server waits 50 ms before the first word: a floor no clock can undercut
    assert good.correct and good.ttft_ms is not None and good.ttft_ms >= 50 - 1
    assert len(good.tbt_ms) == 1 and good.tbt_ms[0] >= 0  # two words: one gap, in order
    assert good.e2e_ms is not None and good.e2e_ms >= good.ttft_ms + good.tbt_ms[0]
    assert records[2].ttft_ms is None and records[2].e2e_ms is None  # timed out: no answer
    assert not records[4].correct and "stage died" in records[4].error


@dataclass(frozen=True)
class _Rec:
    status: str
    ttft_ms: float | None
    correct: bool = True
    tbt_ms: tuple[float, ...] = ()
    e2e_ms: float | None = None
    send_lag_ms: float = 0.0
    task: str = "digit"
    history_turns: int = 0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def test_run_stats_counts_failures_as_misses() -> None:
    recs = [_Rec("ok", 100.0)] * 97 + [_Rec("ok", 900.0, correct=False), _Rec("http_504", None),
                                       _Rec("timeout", None)]
    recs += [_Rec("ok", 100.0, correct=False, history_turns=2)] * 2
    s = run_stats("x", 2.0, 30.0, recs, slo_ms=500.0)
    assert (s.sent, s.ok, s.errors) == (102, 100, {"http_504": 1, "timeout": 1})
    assert s.slo_attainment == pytest.approx(99 / 102)
    assert s.accuracy == pytest.approx(97 / 98) and s.accuracy_with_history == 0.0
    assert s.ttft_p99_ms == 100.0 and math.isinf(s.ttft_p99_all_ms or 0.0)


def _stats(rate: float, p99_all: float, p50: float = 50.0, acc: float = 1.0) -> RunStats:
    return RunStats("x", rate, 30.0, 100, 100, {}, 100, acc, None, 1.0, p50, p99_all, p99_all,
                    10.0, 20.0, 100.0, 200.0, 1.0, {}, {}, {})


def test_max_load_and_knee_need_an_unbroken_ramp() -> None:
    ramp = [_stats(1, 200), _stats(2, 400), _stats(4, 1500), _stats(6, 300)]
    assert max_load_under_slo(ramp, 1000.0) == 2
    assert knee(ramp, 1000.0) == 4
    assert max_load_under_slo([_stats(1, 2000)], 1000.0) is None
    assert knee([_stats(1, 100)], 1000.0) is None


def test_checks_compare_the_full_system_with_the_monolith_and_peers() -> None:
    ramps = {"monolith": [_stats(1, 300, 60), _stats(2, 1200), _stats(4, math.inf)],
             "decoupled": [_stats(1, 250, 70), _stats(2, 900), _stats(4, math.inf)],
             "full": [_stats(1, 250, 70), _stats(2, 500), _stats(4, 900, acc=0.99)],
             "vllm-serve": [_stats(1, 280, 55), _stats(2, 1500), _stats(4, math.inf)]}
    out = checks(ramps, 1000.0)
    ok = out["pass"]
    assert out["figures"]["monolith_knee_rps"] == 2
    assert ok["full_p99_ttft_30pct_below_monolith_at_knee"] is True
    assert ok["full_higher_max_load_than_monolith"] is True
    assert ok["monolith_light_ttft_within_1.2x_vllm"] is True
    assert ok["decoupled_light_ttft_within_1.3x_vllm"] is True
    assert ok["full_beats_vllm-serve_p99_ttft_at_knee"] is True
    assert ok["full_beats_ray-serve-llm_p99_ttft_at_knee"] is None
    assert ok["accuracy_unchanged_under_load"] is True
    same = {"monolith": [_stats(1, 100)], "full": [_stats(1, 100)]}
    assert checks(same, 1000.0)["pass"]["full_higher_max_load_than_monolith"] is None
    same["full"] = [_stats(1, 100), _stats(2, 1500)]
    same["monolith"] = [_stats(1, 100), _stats(2, 200)]
    assert checks(same, 1000.0)["pass"]["full_higher_max_load_than_monolith"] is False
    ramps["full"][1] = _stats(2, 1000)
    assert checks(ramps, 1000.0)["pass"]["full_p99_ttft_30pct_below_monolith_at_knee"] is False
    ramps["full"][2] = _stats(4, 900, acc=0.9)
    assert checks(ramps, 1000.0)["pass"]["accuracy_unchanged_under_load"] is False
