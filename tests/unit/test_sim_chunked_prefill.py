"""Chunked prefill in the simulator's LLM pool (app/sim/generation/llm.py), vLLM V1's scheduler:
a token budget per iteration (`max_prefill_tokens`, vLLM's max_num_batched_tokens), decodes
first (one token each), then the prompt being chunked, then waiting prompts, the last one split.

Toy profiles of tests/helpers/generation_toys.py: a prefill of n tokens takes 5 + 0.1 (n - 1)
ms, a decode step of b sequences 2 + 0.25 (b - 1) ms, an image 10 ms to encode (100 tokens).
"""

from __future__ import annotations

import pytest

from app.sim.generation.config import GenSimConfig, ServePath, StageConfig
from app.sim.generation.requests import GenRequest
from app.sim.generation.sim import GenerationSim, simulate
from tests.helpers.generation_toys import disagg, mono, prefill, toy

LONG = 20_000  # prompt tokens: 8192 + 8192 + 3616 at the default budget of 8192


def _run(reqs: list[GenRequest], cfg: GenSimConfig) -> tuple[list[float], int]:
    sim = GenerationSim(reqs, toy(), cfg)
    result = sim.run()
    return (result.first_s * 1e3).tolist(), sim.llm.iterations


def test_a_long_prompt_takes_one_iteration_per_chunk_and_its_first_token_after_the_last() -> None:
    first, iterations = _run([GenRequest(0.0, LONG, 0, 1)], disagg())
    assert iterations == 3
    assert first == pytest.approx([2 * prefill(8192) + prefill(3616)])
    first, iterations = _run([GenRequest(0.0, LONG, 0, 1)], disagg(chunked_prefill=False))
    assert (iterations, first) == (1, pytest.approx([prefill(LONG)]))


def test_decodes_go_first_and_keep_their_pace_while_a_long_prompt_is_chunked() -> None:
    # r0 (100 tokens, 2 out) has its first token at 14.9 ms; r1 (20k) reaches the replica at
    # 1 ms. Iteration 2 decodes r0 (1 token of the budget) and prefills 8191 of r1; then r1
    # alone: 8192, then the 3617 left
    reqs = [GenRequest(0.0, 100, 0, 2), GenRequest(0.001, LONG, 0, 1)]
    r = simulate(reqs, toy(), disagg())
    second = prefill(100) + prefill(8191) + 2.0  # 840.9 ms
    assert r.finish_s[0] * 1e3 == pytest.approx(second)
    assert r.first_s[1] * 1e3 == pytest.approx(second + prefill(8192) + prefill(3617))
    # unchunked, r0's second token waits for r1's whole prefill (2 s)
    old = simulate(reqs, toy(), disagg(chunked_prefill=False))
    stalled = prefill(100) + prefill(LONG) + 2.0  # 2021.8 ms
    assert (old.finish_s * 1e3).tolist() == pytest.approx([stalled, stalled])
    assert old.first_s[1] * 1e3 == pytest.approx(stalled)


def test_a_text_request_arriving_meanwhile_shares_the_last_chunk_the_chunked_prompt_first() -> None:
    # r1 (100 tokens, earlier deadline: its own 100 ms text SLO) arrives at 1 ms, during r0's
    # first chunk. r0 stays at the head (vLLM schedules a partial prefill before waiting
    # prompts): chunk 2 takes the whole budget; r1 rides chunk 3 (3616 + 100 tokens)
    reqs = [GenRequest(0.0, LONG, 0, 1), GenRequest(0.001, 100, 0, 1)]
    cfg = disagg(ttft_slo_ms=10_000.0, text_ttft_slo_ms=100.0)
    first, iterations = _run(reqs, cfg)
    done = 2 * prefill(8192) + prefill(3616 + 100)
    assert (iterations, first) == (3, pytest.approx([done, done]))
    # unchunked: r1 takes an iteration of its own after r0's whole prefill (in the toy's affine
    # cost, one fixed 5 ms per iteration fewer than chunked: 2018.8 vs 2023.7 ms TTFT)
    first, iterations = _run(reqs, disagg(ttft_slo_ms=10_000.0, text_ttft_slo_ms=100.0,
                                          chunked_prefill=False))
    assert (iterations, first) == (2, pytest.approx([prefill(LONG), prefill(LONG) + prefill(100)]))


def test_the_router_counts_a_chunked_prompt_until_its_first_token() -> None:
    # two replicas: r0 (20k) on one; r1 (1 ms) and r2 (0.9 s, r0 between its chunks) see its
    # 20k pending tokens and go to the other, each first token one 100-token iteration later
    reqs = [GenRequest(0.0, LONG, 0, 1), GenRequest(0.001, 100, 0, 1), GenRequest(0.9, 100, 0, 1)]
    r = simulate(reqs, toy(), disagg(llms=2))
    assert r.ttft_ms().tolist() == pytest.approx([2 * prefill(8192) + prefill(3616),
                                                  prefill(100), prefill(100)])


def test_prompts_fill_the_budget_in_order_and_the_split_one_finishes_next() -> None:
    # budget 150: iteration 1 = r0 (100) + 50 of r1; iteration 2 = r1's 50 + 100 of r2
    reqs = [GenRequest(0.0, 100, 0, 1)] * 3
    r = simulate(reqs, toy(), disagg(max_prefill_tokens=150))
    p = prefill(150)
    assert r.ttft_ms().tolist() == pytest.approx([p, 2 * p, 2 * p])


def test_max_running_counts_the_prompt_being_chunked() -> None:
    # max_running 1: r0 is being chunked, so r1 waits for r0 to finish (2 decode steps later)
    reqs = [GenRequest(0.0, 300, 0, 3), GenRequest(0.0, 100, 0, 1)]
    r = simulate(reqs, toy(), disagg(max_prefill_tokens=200, max_running=1))
    r0_first = prefill(200) + prefill(100)
    assert r.first_s[0] * 1e3 == pytest.approx(r0_first)
    assert r.first_s[1] * 1e3 == pytest.approx(r0_first + 2 * 2.0 + prefill(100))


def test_monolith_runs_the_vision_tower_when_a_prompt_is_first_scheduled() -> None:
    # 10 images (1000 tokens) + 100 text tokens, budget 600: the vision tower (100 ms) and 600
    # tokens in iteration 1, the other 500 in iteration 2
    reqs = [GenRequest(0.0, 100, 10, 1)]
    toy_profiles = toy()
    vision = toy_profiles.encoder.latency_ms(10)
    assert vision == pytest.approx(100.0)
    first, iterations = _run(reqs, mono(max_prefill_tokens=600))
    assert (iterations, first) == (2, pytest.approx([vision + prefill(600) + prefill(500)]))
    first, iterations = _run(reqs, mono(max_prefill_tokens=600, chunked_prefill=False))
    assert (iterations, first) == (1, pytest.approx([vision + prefill(1100)]))


def test_chunked_is_the_default() -> None:
    assert GenSimConfig(ServePath.MONOLITH, StageConfig(1)).chunked_prefill
