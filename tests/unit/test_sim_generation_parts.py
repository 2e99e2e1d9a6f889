"""Pieces of the generation simulator: the image split and the per-class TTFT SLOs (policies, the
live system's too), the pool's router (policies.generation.token_routing's order, ties rotating), the
ModServe-scale profiles held against the paper's ratios (InternVL's tiling), and the
experiment's SLOs and max-load search."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest

from app.sim.generation.config import Routing, StageConfig
from app.sim.generation.experiment import (
    Setup,
    alone_ttft_ms,
    at_rate,
    base_trace,
    make_setup,
    max_load,
    run_point,
    sized_split,
    sweep,
)
from app.sim.generation.metrics import percentile
from app.sim.generation.modserve_profiles import (
    FIG5_SHARE,
    INTERNVL25_26B,
    LLAMA32_11B,
    MODELS,
    calibrate,
    encode_share,
    encoder_ms,
    internvl_tiles,
    model,
    modserve_profiles,
    prefill_ms,
    shape_checks,
    tp_scale,
)
from app.sim.generation.pool import ReplicaPool
from app.sim.kernel import Kernel
from policies.generation.image_split import image_groups
from policies.generation.ttft_slo import IMAGE_TEXT, TEXT_ONLY, TTFTSLOs, request_class


def test_image_groups_split_in_order_within_one_at_most_one_per_replica() -> None:
    assert image_groups(0, 3) == [] and image_groups(5, 1) == [(0, 5)]
    assert image_groups(5, 2) == [(0, 2), (2, 5)] and image_groups(7, 3) == [(0, 2), (2, 5), (5, 7)]
    for n in range(1, 18):
        for fan_out in range(1, 50):
            groups = image_groups(n, fan_out)
            assert len(groups) == min(n, fan_out)
            assert [i for a, b in groups for i in range(a, b)] == list(range(n))
            sizes = [b - a for a, b in groups]
            assert max(sizes) - min(sizes) <= 1


def test_ttft_slos_per_class_from_isolated_runs() -> None:
    slos = TTFTSLOs.from_isolated(10.0, text_only_ttft_ms=6.0, one_image_ttft_ms=30.0)
    assert slos.by_class() == {TEXT_ONLY: 60.0, IMAGE_TEXT: 300.0} and slos.per_class
    assert slos.slo_ms(0) == 60.0 and slos.slo_ms(3) == 300.0
    assert slos.deadline_s(1.0, 0) == pytest.approx(1.06)
    assert request_class(0) == TEXT_ONLY and request_class(2) == IMAGE_TEXT
    assert slos.meets({TEXT_ONLY: 60.0, IMAGE_TEXT: 299.0})
    assert not slos.meets({TEXT_ONLY: 61.0, IMAGE_TEXT: 10.0})
    assert not slos.meets({TEXT_ONLY: 1.0, IMAGE_TEXT: float("inf")})
    assert slos.meets({TEXT_ONLY: float("nan"), IMAGE_TEXT: 10.0})  # no text-only requests
    one = TTFTSLOs(300.0)
    assert not one.per_class and one.slo_ms(0) == one.slo_ms(1) == 300.0
    with pytest.raises(ValueError, match="factor"):
        TTFTSLOs.from_isolated(0.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="image_text_ms"):
        TTFTSLOs(float("nan"))


def _pool(routing: Routing, n: int = 4) -> ReplicaPool:
    return ReplicaPool("p", StageConfig(n, routing=routing), Kernel(), random.Random(0),
                       lambda _: None, lambda _: False)


def test_token_router_picks_the_fewest_tokens_then_fewest_calls_and_rotates_ties() -> None:
    pool = _pool(Routing.TOKENS)
    for k, tokens in enumerate([300, 100, 100, 200]):
        pool.hold(k, tokens)
    pool.hold(1, 0)  # replica 1: same tokens as 2, one more call
    assert {pool.route() for _ in range(20)} == {2}
    pool.release(1, 0)
    picks = [pool.route() for _ in range(6)]  # 1 and 2 tied: taken in turn
    assert set(picks) == {1, 2} and all(a != b for a, b in zip(picks, picks[1:], strict=False))
    pool.settle(2, 100)  # 2's work is done, its call still in flight: fewest tokens now
    assert pool.pending[2].requests == 1 and {pool.route() for _ in range(5)} == {2}
    least = _pool(Routing.LEAST_REQUESTS)
    least.hold(0, 1)
    least.hold(1, 10_000)
    least.hold(1, 0)
    assert [least.route() for _ in range(4)] in ([2, 3, 2, 3], [3, 2, 3, 2])
    rr = _pool(Routing.ROUND_ROBIN, 3)
    assert [rr.route() for _ in range(5)] == [0, 1, 2, 0, 1]


def test_scaling_down_removes_starting_replicas_first_and_counts_accelerator_time() -> None:
    kernel = Kernel()
    pool = ReplicaPool("p", StageConfig(2, accelerators_per_replica=4, startup_s=10.0), kernel,
                       random.Random(0), lambda _: None, lambda _: False)
    pool.set_replicas(3, 1.0)
    assert pool.target == 3 and pool.ready == [0, 1]
    pool.set_replicas(2, 2.0)  # the one starting goes at once
    assert pool.held == 2 and pool.gone_s[2] == 2.0
    pool.hold(0, 500)
    pool.set_replicas(1, 3.0)  # the idle ready one (fewest tokens) goes
    assert pool.ready == [0] and pool.gone_s[1] == 3.0
    kernel.run()
    assert pool.accelerator_seconds(5.0) == pytest.approx(4 * (5.0 + 3.0 + 1.0))
    with pytest.raises(ValueError, match=">= 0"):
        pool.set_replicas(-1, 0.0)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_profiles_reproduce_figure_5_and_the_batching_shapes(name: str) -> None:
    spec = MODELS[name]
    assert encode_share(spec) == pytest.approx(FIG5_SHARE[name], abs=0.005)
    knob = "encoder_mfu" if name.startswith("llama") else "prefill_mfu"
    assert getattr(calibrate(spec, FIG5_SHARE[name], knob).efficiency, knob) == pytest.approx(
        getattr(spec.efficiency, knob), abs=0.002)
    checks = shape_checks(name)
    assert 7.0 < checks["encoder_batch8_vs_1"] <= 8.0  # Fig. 6c/8: linear, no batching gain
    assert 1.0 < checks["decode_batch64_vs_1"] < 2.0  # Fig. 8: decode batches almost for free
    serial = spec.efficiency.encoder_tp_serial  # §3.1: a 6B encoder 1.3x faster at TP-8
    assert tp_scale(8, serial) / tp_scale(4, serial) == pytest.approx(1 / 1.3, abs=0.002)
    assert checks["encoder_tp8_vs_tp4"] == pytest.approx(1 / 1.3, abs=0.03)  # + step overhead
    disaggregated, monolith = modserve_profiles(name)
    assert disaggregated.encoder.latency_ms(1) > monolith.encoder.latency_ms(1)  # TP-1 vs TP-4
    assert disaggregated.llm.prefill_ms == monolith.llm.prefill_ms  # both TP-4


def test_cross_attention_prefill_batches_better_than_decoder_only() -> None:
    # Fig. 8 / Insight 4: short text-only prefills of a cross-attention model gain from batching
    assert shape_checks("llama3.2-11b")["prefill_batch8_vs_1"] < 6.0
    assert shape_checks("internvl2.5-26b")["prefill_batch8_vs_1"] > 7.5
    assert LLAMA32_11B.tokens_per_image == 1601 and INTERNVL25_26B.tokens_per_image == 5 * 256
    assert encoder_ms(LLAMA32_11B, 2, 1) == pytest.approx(
        2 * encoder_ms(LLAMA32_11B, 1, 1) - LLAMA32_11B.efficiency.step_overhead_ms)
    assert prefill_ms(INTERNVL25_26B, 2000, 4) > 3 * prefill_ms(LLAMA32_11B, 2000, 4)


def test_internvl_tiling_follows_the_aspect_ratio_then_the_area() -> None:
    assert internvl_tiles(896, 896) == 5  # Table 1's example: 2 x 2 + a thumbnail
    assert internvl_tiles(500, 500) == internvl_tiles(633, 633) == 1  # small squares: one tile
    assert internvl_tiles(634, 634) == 5 and internvl_tiles(1000, 1000) == 10
    assert internvl_tiles(640, 480) == internvl_tiles(480, 640) == 13  # 4:3 -> 4 x 3 (+1)
    assert internvl_tiles(750, 500) == 7 and internvl_tiles(640, 360) == 3
    assert internvl_tiles(1920, 1080) == 9  # 16:9 -> 2:1; big enough for 4 x 2 (+1)
    assert internvl_tiles(640, 480, max_num=6) == 7 and internvl_tiles(896, 896,
                                                                       use_thumbnail=False) == 4


def test_other_tiles_are_calibrated_again_on_that_image() -> None:
    one = model("internvl2.5-26b", tiles=1)
    assert one.tokens_per_image == 256 and encode_share(one) == pytest.approx(0.25, abs=0.005)
    assert one.efficiency.prefill_mfu != INTERNVL25_26B.efficiency.prefill_mfu
    forced = model("internvl2.5-26b", tiles=1, prefill_mfu=0.5)  # an explicit value is kept
    assert forced.efficiency.prefill_mfu == 0.5 and encode_share(forced) > 0.5
    assert model("internvl2.5-26b") == INTERNVL25_26B
    with pytest.raises(ValueError, match="valid"):
        model("llava")


def test_max_load_bisects_to_the_threshold() -> None:
    assert max_load(lambda r: r <= 123.0, 100.0, 200.0, steps=12) == pytest.approx(123.0, rel=0.01)
    assert max_load(lambda r: False, 0.0, 50.0) == 0.0


def _setup() -> Setup:
    return make_setup("llama3.2-11b", 10.0)


def test_setup_slos_are_the_factor_times_each_class_isolated_ttft() -> None:
    setup = _setup()
    assert setup.ttft_slo_ms == pytest.approx(10.0 * setup.isolated_ttft_ms)
    assert setup.isolated_text_ttft_ms == pytest.approx(setup.monolith.llm.prefill_time_ms(100))
    assert setup.text_ttft_slo_ms == pytest.approx(10.0 * setup.isolated_text_ttft_ms)
    assert make_setup("llama3.2-11b", 10.0, per_class_slo=False).text_ttft_slo_ms is None
    # isolated one-image TTFT on the monolith: its vision tower, then the (text) prefill
    assert setup.isolated_ttft_ms == pytest.approx(
        setup.monolith.encoder.latency_ms(1) + setup.monolith.llm.prefill_time_ms(100))
    assert setup.accelerators == {"monolith": 128, "disaggregated": 128}


def test_alone_ttft_encodes_in_sequence_on_the_monolith_in_parallel_disaggregated() -> None:
    setup = _setup()
    mono, dis = setup.monolith, setup.disaggregated
    prompt = mono.llm.prefill_time_ms(100)  # cross-attention: the images are not prompt tokens
    assert alone_ttft_ms(setup, "monolith", 4) == pytest.approx(
        mono.encoder.latency_ms(4) + prompt)
    one = alone_ttft_ms(setup, "modserve", 1)
    assert one >= dis.encoder.latency_ms(1) + dis.llm.prefill_time_ms(100)
    # 8 images on 8 of the 48 image instances: about one image's time, not eight's
    assert alone_ttft_ms(setup, "modserve", 8) < one + 2 * setup.transfer_ms_per_image * 8
    assert alone_ttft_ms(setup, "monolith", 8) > 2 * alone_ttft_ms(setup, "modserve", 8)


def test_internvl_p99_image_request_misses_the_factor_10_slo_alone_on_every_system() -> None:
    """The zero-load floor (python -m bench modserve-zero-load): the 13-image request (the P99 of the
    figure's image-text requests) misses 10 x the one-image TTFT before any load; 10 images fit."""
    setup = make_setup("internvl2.5-26b", 10.0)
    for system in ("monolith", "modserve"):
        assert alone_ttft_ms(setup, system, 13) > setup.ttft_slo_ms, system
        assert alone_ttft_ms(setup, system, 10) <= setup.ttft_slo_ms, system


def test_sized_split_keeps_the_accelerators_and_follows_the_heavier_stage() -> None:
    setup, trace = _setup(), base_trace(2000, 0.5, 1)
    text, image = sized_split(setup, trace)
    assert 4 * text + image == 128
    heavier = sized_split(setup, replace(trace, num_images=trace.num_images * 2))
    assert heavier[1] > image  # twice the images: more image instances


def test_at_rate_scales_time_only_and_a_light_load_meets_the_slo() -> None:
    trace = base_trace(1500, 0.5, 2)
    fast = at_rate(trace, 50.0)
    assert np.allclose(fast.arrival_s * 50.0, trace.arrival_s)
    assert np.array_equal(fast.num_images, trace.num_images)
    setup = _setup()
    light = run_point(setup, "modserve", trace, 20.0)
    assert light.served == light.requests and light.meets_slo
    heavy = run_point(setup, "monolith", trace, 5000.0)
    assert not heavy.meets_slo and heavy.ttft_p99_image_ms > setup.ttft_slo_ms


def test_attainment_is_the_weaker_criterion() -> None:
    # each class's P99 within its SLO implies 99% of all requests within theirs, not back
    result = sweep(_setup(), "modserve", base_trace(1500, 0.5, 2), (20.0, 4000.0), refine_steps=3)
    assert result.bounded == {"p99": True, "attainment": True}
    assert 20.0 <= result.max_load_rps["p99"] <= result.max_load_rps["attainment"] < 4000.0
    for _, s in result.points:
        assert not s.meets_slo or s.slo_attainment >= 0.99


def test_percentile_is_an_observed_value_and_keeps_infinity() -> None:
    values = np.array([1.0, 2.0, 3.0, np.inf])
    assert percentile(values, 50) == 2.0
    assert percentile(values, 99) == np.inf
    assert np.isnan(percentile(np.array([]), 50))
