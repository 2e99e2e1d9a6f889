"""Autoscaling in the generation simulator (app/sim/generation/autoscale.py): the live policy
(policies.autoscaling) driven by the stages' metered loads, on short hand-made traces.

Toy profiles (tests/helpers/generation_toys.py): an image takes 10 ms to encode (100 tokens; 10,000 image tokens/s per encoder at
any batch), a prefill of n tokens 5 + 0.1 (n - 1) ms (1001 tokens in 105 ms: 9,533 prompt
tokens/s per LLM replica); prompts of one output token (no decode).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.generation.autoscale import (
    ENC_IMAGE,
    LLM_IMAGE,
    LLM_IMAGES,
    LLM_TEXT,
    Autoscaler,
    Autoscaling,
    Capacities,
    PolicyTiming,
    app_settings,
    autoscaled,
    capacities,
)
from app.sim.generation.autoscale_day import day_trace
from app.sim.generation.config import GenSimConfig, ServePath, StageConfig
from app.sim.generation.metrics import summarize
from app.sim.generation.workload import TraceArrays
from policies.autoscaling import ENCODER, LLM
from policies.generation.stage_profile import StageProfiles
from policies.generation.token_routing import Architecture
from policies.generation.ttft_slo import TTFTSLOs
from tests.helpers.generation_toys import toy

SLOS = TTFTSLOs(1000.0)
# period 0.5 s (window the same), scale down after 1 s low, replicas serve 0.25 s after asked
AUTO = Autoscaling(PolicyTiming(0.5, 0.5, 1.0, 1.0, 0.25, 0.25), target_utilization=0.8,
                   max_accelerators=16)


def burst_trace(duration_s: float = 12.0) -> TraceArrays:
    """Text-only requests (100 tokens) at 20/s all along; image requests (10 text tokens, 4
    images: 16,000 image tokens/s) at 40/s from 4 s to 8 s; evenly spaced."""
    text = np.arange(0.0, duration_s, 1 / 20)
    image = np.arange(4.0, 8.0, 1 / 40) + 1e-4
    arrival = np.concatenate([text, image])
    order = np.argsort(arrival, kind="stable")
    n = arrival.size
    text_tokens = np.concatenate([np.full(text.size, 100), np.full(image.size, 10)])
    images = np.concatenate([np.zeros(text.size), np.full(image.size, 4)])
    return TraceArrays(arrival[order], text_tokens[order].astype(np.int64),
                       images[order].astype(np.int64), np.ones(n, dtype=np.int64), duration_s)


def caps(profiles: StageProfiles) -> Capacities:
    return capacities(profiles, SLOS, 100.0, 0.0, 4)


def modserve(arch: Architecture, trace: TraceArrays | None = None) -> tuple:  # type: ignore[type-arg]
    profiles = toy(arch)
    cfg = GenSimConfig(ServePath.DISAGGREGATED, StageConfig(1), StageConfig(1),
                       ttft_slo_ms=SLOS.image_text_ms, encoder_max_batch=4)
    return autoscaled(trace if trace is not None else burst_trace(), profiles, cfg,
                      caps(profiles), AUTO, {ENCODER: 1, LLM: 1})


def series(scaler: Autoscaler, stage: str, t0: float, t1: float) -> list[int]:
    return [t.target[stage] for t in scaler.ticks if t0 <= t.time_s < t1]


def test_toy_capacities_are_the_profiles_at_the_slo() -> None:
    c = caps(toy(Architecture.CROSS_ATTENTION))
    assert c.encoder_tokens_per_s == pytest.approx(10_000.0)
    assert c.llm_tokens_per_s == pytest.approx(1001 / 0.105)
    # monolith: one image costs a replica as long as C_llm / (C_enc / 100) prompt tokens
    assert c.image_token_equivalent == pytest.approx(1001 / 0.105 / 100.0)


def test_cross_attention_burst_scales_the_encoders_up_and_back_while_the_llm_stays() -> None:
    result, scaler = modserve(Architecture.CROSS_ATTENTION)
    before, burst, after = (series(scaler, ENCODER, a, b) for a, b in
                            ((0.0, 4.0), (5.0, 8.0), (10.5, 13.0)))
    assert set(before) == {1}
    assert max(burst) >= 3  # 16,000 image tokens/s at 0.8 x 10,000 per encoder: 2, + forecast
    assert after and set(after) == {1}  # back down once the burst has been gone > 1 s
    assert {t.target[LLM] for t in scaler.ticks} == {1}  # text tokens only, far below capacity
    assert summarize(result).served == len(result.arrival_s)


def test_decoder_only_burst_grows_the_llm_too() -> None:
    _, scaler = modserve(Architecture.DECODER_ONLY)
    assert set(series(scaler, LLM, 0.0, 4.0)) == {1}
    assert max(series(scaler, LLM, 5.0, 8.0)) >= 2  # the image tokens reach its prefill
    assert max(series(scaler, ENCODER, 5.0, 8.0)) >= 3


def test_the_monolith_scales_with_the_burst() -> None:
    profiles = toy(Architecture.CROSS_ATTENTION)
    cfg = GenSimConfig(ServePath.MONOLITH, StageConfig(1), ttft_slo_ms=SLOS.image_text_ms)
    result, scaler = autoscaled(burst_trace(), profiles, cfg, caps(profiles), AUTO, {LLM: 1})
    # 2,000 + 400 text tokens/s + 160 images/s x 95.3 token-equivalents: 17,650 / 7,626 -> 3
    assert set(series(scaler, LLM, 0.0, 4.0)) == {1}
    assert max(series(scaler, LLM, 5.0, 8.0)) >= 3
    assert series(scaler, LLM, 10.5, 13.0)[-1] == 1
    assert set(scaler.ticks[0].target) == {LLM}


def test_meters_count_what_each_stage_receives() -> None:
    trace = burst_trace()
    profiles = toy(Architecture.DECODER_ONLY)
    from app.sim.generation.autoscale import MeteredSim

    cfg = GenSimConfig(ServePath.DISAGGREGATED, StageConfig(4), StageConfig(4))
    sim = MeteredSim(trace, profiles, cfg, 1.0)
    sim.run()
    images = int(trace.num_images.sum())
    assert sim.meters[ENC_IMAGE].total == images * 100
    assert sim.meters[LLM_IMAGE].total == images * 100
    assert sim.meters[LLM_IMAGES].total == images
    assert sim.meters[LLM_TEXT].total == int(trace.text_tokens.sum())
    assert sim.in_time[LLM] == [len(trace), 0]  # light load: every first token in time
    assert sim.in_time[ENCODER] == [int((trace.num_images > 0).sum()), 0]


def test_accelerator_seconds_of_a_hand_case() -> None:
    """No traffic; the monolith starts with 3 replicas of 4 accelerators: the policy wants 1
    from the first decision (t = 0.5) and may scale down once that lasted 1 s (t = 1.5); the
    idle replicas go at once. 4 x 5 s + 2 x 4 x 1.5 s = 32 accelerator-seconds."""
    profiles = toy(Architecture.CROSS_ATTENTION)
    empty = TraceArrays(np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64),
                        np.zeros(0, np.int64), 5.0)
    cfg = GenSimConfig(ServePath.MONOLITH, StageConfig(3, accelerators_per_replica=4))
    result, scaler = autoscaled(empty, profiles, cfg, caps(profiles), AUTO, {LLM: 4})
    assert [t.target[LLM] for t in scaler.ticks][:4] == [3, 3, 1, 1]
    assert [t.reason[LLM] for t in scaler.ticks][:3] == ["hold_scale_down_delay"] * 2 + ["down"]
    assert result.accelerator_seconds == pytest.approx(4 * 5.0 + 2 * 4 * 1.5)
    assert [t.accelerators for t in scaler.ticks][:3] == [12, 12, 4]
    assert len(scaler.decision_ns) == len(scaler.ticks) == 10


def test_the_budget_cuts_targets_in_proportion_and_counts_draining_replicas() -> None:
    c = caps(toy(Architecture.DECODER_ONLY))
    auto = Autoscaling(PolicyTiming(), max_accelerators=128)
    tp = {ENCODER: 1, LLM: 4}
    scaler = Autoscaler(app_settings(c, auto, Architecture.DECODER_ONLY, tp), c, auto, tp,
                        monolith=False)
    fit = scaler.within_budget({ENCODER: 20, LLM: 20}, {ENCODER: 0, LLM: 0})
    assert fit == {ENCODER: 20, LLM: 20} and scaler.clamped == 0
    cut = scaler.within_budget({ENCODER: 40, LLM: 30}, {ENCODER: 0, LLM: 2})
    assert cut[ENCODER] + 4 * cut[LLM] <= 128 - 8
    assert 1 < cut[ENCODER] < 40 and 1 < cut[LLM] < 30 and scaler.clamped == 1


def test_runs_are_deterministic() -> None:
    a, sa = modserve(Architecture.DECODER_ONLY)
    b, sb = modserve(Architecture.DECODER_ONLY)
    assert a.accelerator_seconds == b.accelerator_seconds
    assert [(t.target, t.held, t.load_tokens_per_s) for t in sa.ticks] == \
        [(t.target, t.held, t.load_tokens_per_s) for t in sb.ticks]
    assert np.array_equal(a.first_s, b.first_s, equal_nan=True)


def test_compression_divides_time_and_keeps_the_request_rate() -> None:
    timing = PolicyTiming().compressed(4.0)
    assert timing.period_s == 75.0 and timing.llm_startup_s == 15.0
    day = day_trace(0.2, 1.0, seed=3)  # a day at 0.2 requests/s
    fast = day_trace(0.8, 4.0, seed=3)  # a day at 0.8 requests/s, 4x compressed
    assert fast.duration_s == pytest.approx(day.duration_s / 4)
    np.testing.assert_allclose(fast.arrival_s * 4, day.arrival_s)  # the same requests
    assert np.array_equal(fast.num_images, day.num_images)
    assert len(fast) / fast.duration_s == pytest.approx(4 * len(day) / day.duration_s)
