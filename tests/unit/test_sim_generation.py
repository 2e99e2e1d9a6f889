"""The generation simulator (app/sim/generation/) on hand-computed cases.

Toy profiles (tests/helpers/generation_toys.py): an image takes 10 ms to encode (linear in the batch); a prefill of n tokens takes
5 + 0.1 (n - 1) ms; a decode step of b sequences 2 + 0.25 (b - 1) ms; 100 tokens per image.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.sim.generation.config import GenSimConfig, Order, Routing, ServePath, StageConfig
from app.sim.generation.metrics import summarize
from app.sim.generation.requests import GenRequest
from app.sim.generation.sim import LOST, OK, GenerationSim, simulate
from policies.generation.token_routing import Architecture
from tests.helpers.generation_toys import disagg, mono, prefill, toy


def test_one_request_ttft_is_encode_plus_prefill_then_decode_steps() -> None:
    r = simulate([GenRequest(0.0, 100, 1, 3)], toy(), disagg())
    assert r.ttft_ms()[0] == pytest.approx(10.0 + prefill(200))  # text + image tokens
    assert r.tbt_ms()[0] == pytest.approx(2.0)  # two decode steps of one sequence
    assert r.e2e_ms()[0] == pytest.approx(10.0 + prefill(200) + 4.0)
    cross = simulate([GenRequest(0.0, 100, 1, 3)], toy(Architecture.CROSS_ATTENTION), disagg())
    assert cross.ttft_ms()[0] == pytest.approx(10.0 + prefill(100))  # text tokens only


def test_transfer_time_per_image_delays_the_llm() -> None:
    r = simulate([GenRequest(0.0, 100, 2, 1)], toy(), disagg(2, transfer_ms_per_image=3.0))
    assert r.ttft_ms()[0] == pytest.approx(10.0 + 6.0 + prefill(300))


def test_two_simultaneous_prompts_share_one_prefill_and_decode_together() -> None:
    reqs = [GenRequest(0.0, 100, 0, 3), GenRequest(0.0, 100, 0, 3)]
    r = simulate(reqs, toy(), disagg())
    assert r.ttft_ms().tolist() == pytest.approx([prefill(200)] * 2)
    assert r.tbt_ms().tolist() == pytest.approx([2.25, 2.25])  # decode batch of two


def test_a_prompt_arriving_mid_iteration_joins_the_next_one() -> None:
    reqs = [GenRequest(0.0, 100, 0, 3), GenRequest(0.005, 100, 0, 3)]
    r = simulate(reqs, toy(), disagg())
    t1 = prefill(100)  # r0's first token
    t2 = t1 + prefill(100) + 2.0  # r1's prefill + r0's decode step (batch 1)
    t3 = t2 + 2.25  # both decode
    assert r.first_s.tolist() == pytest.approx([t1 / 1000, t2 / 1000])
    assert r.finish_s.tolist() == pytest.approx([t3 / 1000, (t3 + 2.0) / 1000])
    assert r.tbt_ms().tolist() == pytest.approx([(t3 - t1) / 2, (t3 + 2.0 - t2) / 2])


def test_unchunked_prefill_token_budget_admits_one_prompt_at_least_per_iteration() -> None:
    # the unchunked model (chunked, the 150-token budget would split the second prompt:
    # tests/unit/test_sim_chunked_prefill.py)
    reqs = [GenRequest(0.0, 100, 0, 1)] * 3
    r = simulate(reqs, toy(), disagg(max_prefill_tokens=150, chunked_prefill=False))
    p = prefill(100)
    assert r.ttft_ms().tolist() == pytest.approx([p, 2 * p, 3 * p])
    wide = simulate(reqs, toy(), disagg(max_prefill_tokens=300, chunked_prefill=False))
    assert wide.ttft_ms().tolist() == pytest.approx([prefill(300)] * 3)


def test_max_running_holds_prompts_back() -> None:
    reqs = [GenRequest(0.0, 100, 0, 3)] * 2
    r = simulate(reqs, toy(), disagg(max_running=1))
    assert r.ttft_ms()[1] > r.e2e_ms()[0] - 1e-9  # the second starts once the first is done


def test_monolith_encodes_inside_the_iteration_and_blocks_what_is_behind() -> None:
    reqs = [GenRequest(0.0, 100, 4, 1), GenRequest(0.001, 100, 0, 1)]
    m = simulate(reqs, toy(), mono())
    big = 40.0 + prefill(500)  # vision tower on 4 images, then the prefill, one iteration
    assert m.ttft_ms().tolist() == pytest.approx([big, big + prefill(100) - 1.0])
    d = simulate(reqs, toy(), disagg(encoders=4))
    # disaggregated: the text request does not wait; the 4 images encode in parallel (done at
    # 10 ms) and their prefill follows the text request's iteration (1 ms + 14.9 ms)
    assert d.ttft_ms().tolist() == pytest.approx([1.0 + prefill(100) + prefill(500),
                                                  prefill(100)])
    assert d.config.accelerators == 5 and m.config.accelerators == 1


def test_routing_spreads_a_requests_images_over_the_encoders() -> None:
    r = simulate([GenRequest(0.0, 10, 8, 1)], toy(), disagg(encoders=8))
    assert r.llm_s[0] == pytest.approx(0.010)  # eight one-image groups, in parallel
    one = simulate([GenRequest(0.0, 10, 8, 1)], toy(), disagg(encoders=1, encoder_max_batch=4))
    assert one.llm_s[0] == pytest.approx(0.080)  # two batches of four on one encoder


def test_token_routing_avoids_the_loaded_encoder_round_robin_does_not() -> None:
    # two encoders, one image per batch: r0's image and 3 of r1's 5 on one encoder, 2 on the
    # other; r2 and r3 (one image each) go where the fewest image tokens wait: both to the one
    # holding 2 (r3 done at 40 ms); round robin sends r3 to the one holding 4 (done at 50 ms)
    reqs = [GenRequest(0.0, 10, 1, 1), GenRequest(0.0, 10, 5, 1), GenRequest(0.001, 10, 1, 1),
            GenRequest(0.002, 10, 1, 1)]

    def cfg(routing: Routing) -> GenSimConfig:
        return GenSimConfig(ServePath.DISAGGREGATED, StageConfig(1),
                            StageConfig(2, routing=routing, order=Order.FIFO),
                            encoder_max_batch=1)

    for seed in range(5):  # whichever way the ties fall
        tokens = simulate(reqs, toy(), GenSimConfig(**{**cfg(Routing.TOKENS).__dict__,
                                                       "seed": seed}))
        assert tokens.encoded_s[3] == pytest.approx(0.040)
    rr = simulate(reqs, toy(), cfg(Routing.ROUND_ROBIN))
    assert rr.encoded_s[3] == pytest.approx(0.050)
    assert rr.images_encoded == tokens.images_encoded == 8


def test_same_seed_same_run_and_the_seed_matters_for_random_routing() -> None:
    rng = np.random.default_rng(3)
    reqs = [GenRequest(float(t), int(x), int(m), int(o)) for t, x, m, o in zip(
        np.sort(rng.uniform(0, 2, 300)), rng.integers(10, 400, 300), rng.integers(0, 6, 300),
        rng.integers(1, 40, 300), strict=True)]
    cfg = GenSimConfig(ServePath.DISAGGREGATED, StageConfig(3, routing=Routing.RANDOM),
                       StageConfig(4, routing=Routing.RANDOM), seed=7)
    a, b = simulate(reqs, toy(), cfg), simulate(reqs, toy(), cfg)
    assert np.array_equal(a.first_s, b.first_s) and np.array_equal(a.finish_s, b.finish_s)
    other = simulate(reqs, toy(), GenSimConfig(cfg.path, cfg.llm, cfg.encoder, seed=8))
    assert not np.array_equal(a.first_s, other.first_s)
    assert (a.outcome == OK).all()


def test_added_replicas_serve_after_their_startup_and_removed_ones_drain() -> None:
    reqs = [GenRequest(0.1 * i, 100, 0, 50) for i in range(20)]
    sim = GenerationSim(reqs, toy(), GenSimConfig(ServePath.MONOLITH, StageConfig(1, startup_s=1.0)))
    sim.set_replicas("llm", 2, 0.0)
    sim.every(1.5, lambda s, now: s.set_replicas("llm", 1, now), until_s=1.5)
    result = sim.run()
    pool = sim.llm.pool
    assert (0.0, 1, 2) in pool.log  # one serving, one starting
    assert (1.0, 2, 2) in pool.log  # the second serves after its startup
    gone = pool.gone_s[0] if pool.gone_s[0] is not None else pool.gone_s[1]
    assert gone is not None and gone >= 1.5  # drained after the scale-down, not cut off
    assert (result.outcome == OK).all()
    with pytest.raises(ValueError, match="valid"):
        sim.set_replicas("encoder", 1, 0.0)


def test_drop_lost_answers_deadline_exceeded_and_counts_as_infinitely_late() -> None:
    # the first request's two images encode in parallel and it makes 10 + 34.9 <= 50 ms; the
    # others' images would start at 10 ms, and 10 + 10 + 34.9 > 50: answered unencoded
    reqs = [GenRequest(0.0, 100, 2, 1) for _ in range(4)]
    r = simulate(reqs, toy(), disagg(encoders=2, ttft_slo_ms=50.0, drop_lost=True,
                                     encoder_max_batch=1))
    assert r.outcome.tolist() == [OK, LOST, LOST, LOST]
    assert r.ttft_ms()[0] == pytest.approx(10.0 + prefill(300))
    assert r.images_encoded == 2
    s = summarize(r)
    assert s.lost == 3 and math.isinf(s.ttft_p99_ms) and s.slo_attainment == 0.25
    kept = simulate(reqs, toy(), disagg(encoders=2, ttft_slo_ms=50.0, encoder_max_batch=1))
    assert (kept.outcome == OK).all() and kept.images_encoded == 8


def test_summary_percentiles_and_warmup() -> None:
    reqs = [GenRequest(float(i), 100, 0, 1) for i in range(100)]
    s = summarize(simulate(reqs, toy(), disagg(warmup_s=50.0)))
    assert s.requests == 50 and s.served == 50
    assert s.ttft_p99_ms == pytest.approx(prefill(100)) and s.slo_attainment == 1.0


def test_config_names_the_valid_choices() -> None:
    with pytest.raises(ValueError, match="valid"):
        StageConfig(1, routing="fastest")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="valid"):
        GenSimConfig("sideways", StageConfig(1))  # type: ignore[arg-type]


def test_llm_token_count_holds_a_prompt_until_its_last_or_first_token() -> None:
    reqs = [GenRequest(0.0, 100, 0, 5)]
    for until_done, tokens_after_first in ((True, 100), (False, 0)):
        sim = GenerationSim(reqs, toy(), disagg(prompt_tokens_until_done=until_done))
        seen: list[tuple[int, int]] = []
        pending = sim.llm.pool.pending[0]
        sim.kernel.at(0.016, 5, lambda _t, _p, s=seen, p=pending: s.append((p.tokens, p.requests)))
        sim.run()
        assert seen == [(tokens_after_first, 1)]  # after the first token (14.9 ms), in flight
        assert (pending.tokens, pending.requests) == (0, 0)


def test_deadline_batching_keeps_the_heads_deadline_and_puts_the_rest_back() -> None:
    # one encoder, batches of up to 4: with 54.9 ms of prefill after it, a batch of 2 (20 ms)
    # keeps an 80 ms deadline and a batch of 3 would not; the 2 left expire at the next step
    reqs = [GenRequest(0.0, 100, 4, 1)]
    lost = simulate(reqs, toy(), disagg(ttft_slo_ms=80.0, drop_lost=True, encoder_max_batch=4))
    assert lost.outcome.tolist() == [LOST] and lost.images_encoded == 2
    assert lost.encoded_s[0] == pytest.approx(0.020)
    kept = simulate(reqs, toy(), disagg(ttft_slo_ms=80.0, encoder_max_batch=4))
    assert kept.ttft_ms()[0] == pytest.approx(40.0 + prefill(500))


def test_text_only_requests_have_their_own_slo_and_deadline_order_serves_them_first() -> None:
    # one LLM replica admitting one 100-token prompt per iteration (unchunked: chunked, the
    # 150-token budget would split prompts, which test_sim_chunked_prefill.py checks with deadline
    # order); r0 (text) runs 0-14.9 ms;
    # r1 (one image, 10 text tokens) reaches the LLM at 10 ms, r2 (text) at 12 ms. Per-class
    # SLOs (text 100 ms, image 1000 ms): r2's deadline (112 ms) is before r1's (1000 ms), so r2
    # is prefilled first; with one SLO for all, r1's deadline is earlier and it goes first
    reqs = [GenRequest(0.0, 100, 0, 1), GenRequest(0.0, 10, 1, 1), GenRequest(0.012, 100, 0, 1)]
    t0 = prefill(100)  # r0's first token
    per_class = simulate(reqs, toy(), disagg(ttft_slo_ms=1000.0, text_ttft_slo_ms=100.0,
                                             max_prefill_tokens=150, chunked_prefill=False))
    assert (per_class.first_s * 1e3).tolist() == pytest.approx(
        [t0, t0 + prefill(100) + prefill(110), t0 + prefill(100)])
    one_slo = simulate(reqs, toy(), disagg(ttft_slo_ms=1000.0, max_prefill_tokens=150,
                                           chunked_prefill=False))
    assert (one_slo.first_s * 1e3).tolist() == pytest.approx(
        [t0, t0 + prefill(110), t0 + prefill(110) + prefill(100)])
    fifo = GenSimConfig(ServePath.DISAGGREGATED, StageConfig(1, order=Order.FIFO), StageConfig(1),
                        ttft_slo_ms=1000.0, text_ttft_slo_ms=100.0, max_prefill_tokens=150,
                        chunked_prefill=False)
    assert simulate(reqs, toy(), fifo).first_s.tolist() == one_slo.first_s.tolist()


def test_each_class_is_held_to_its_own_slo() -> None:
    # text-only requests take 14.9 ms, one-image requests 10 + 24.9 ms (prefill of 200 tokens)
    reqs = [GenRequest(float(i), 100, i % 2, 1) for i in range(40)]
    r = simulate(reqs, toy(), disagg(ttft_slo_ms=30.0, text_ttft_slo_ms=20.0))
    s = summarize(r)
    assert s.ttft_p99_text_ms == pytest.approx(prefill(100))
    assert s.ttft_p99_image_ms == pytest.approx(10.0 + prefill(200))
    assert (s.ttft_slo_ms, s.text_ttft_slo_ms) == (30.0, 20.0)
    assert not s.meets_slo and s.slo_attainment == 0.5  # the image requests miss 30 ms
    assert s.slo_ratio == pytest.approx((10.0 + prefill(200)) / 30.0)
    ok = summarize(simulate(reqs, toy(), disagg(ttft_slo_ms=40.0, text_ttft_slo_ms=15.0)))
    assert ok.meets_slo and ok.slo_attainment == 1.0
    text_late = summarize(simulate(reqs, toy(), disagg(ttft_slo_ms=40.0, text_ttft_slo_ms=14.0)))
    assert not text_late.meets_slo  # the text-only class misses its own, tighter SLO
    text_only = simulate(reqs[::2], toy(), disagg(ttft_slo_ms=1.0, text_ttft_slo_ms=15.0))
    assert summarize(text_only).meets_slo  # no image requests: their class does not count
    with pytest.raises(ValueError, match="text_only_ms"):
        disagg(text_ttft_slo_ms=0.0)


def test_llm_replicas_count_prompt_tokens_until_the_first_token_by_default() -> None:
    assert not disagg().prompt_tokens_until_done
    # two LLM replicas X, Y: r0 (3000 tokens) on X is prefilled by 305 ms and decodes for
    # ~400 ms more; r1 (1000 tokens, at 310 ms) goes to Y (X holds a call); r2 (at 350 ms,
    # while r1's prefill runs) goes where the fewest prefill tokens wait: X, whose r0 is only
    # decoding. Counting prompts until their last token, X still holds 3000 and r2 goes to Y
    reqs = [GenRequest(0.0, 3000, 0, 200), GenRequest(0.31, 1000, 0, 1),
            GenRequest(0.35, 100, 0, 1)]
    for until_done in (False, True):
        sim = GenerationSim(reqs, toy(), disagg(llms=2, prompt_tokens_until_done=until_done))
        chosen: list[int | None] = []
        route = sim.llm.pool.route

        def noted(route=route, chosen=chosen) -> int | None:  # type: ignore[no-untyped-def]
            chosen.append(route())
            return chosen[-1]

        sim.llm.pool.route = noted  # type: ignore[method-assign]
        sim.run()
        x, y = chosen[0], 1 - int(chosen[0] or 0)
        assert chosen == [x, y, y if until_done else x], until_done
