"""The stage profiles' arithmetic (policies/generation/stage_profile.py): interpolation between
profiled points, capacities at SLOs, the JSON round trip and the errors on bad input."""

from __future__ import annotations

import json

import pytest

from policies.generation.stage_profile import (
    FORMAT_VERSION,
    EncoderProfile,
    LLMProfile,
    StageProfiles,
    interpolate,
)
from policies.generation.token_routing import Architecture

ENCODER = EncoderProfile(16, {1: 2.0, 2: 3.0, 4: 5.0, 8: 9.0, 16: 17.0})
LLM = LLMProfile(Architecture.DECODER_ONLY, {16: 4.0, 64: 6.0, 256: 14.0},
                 {1: 2.0, 4: 2.4, 16: 3.2, 32: 6.4})


def profiles() -> StageProfiles:
    return StageProfiles("vlm", "cpu:test", ENCODER, LLM, {"repeats": 5, "p95": {"1": 2.5}})


# interpolation


def test_interpolate_is_linear_between_points_and_flat_below() -> None:
    pts = ((2, 10.0), (4, 20.0), (8, 24.0))
    assert interpolate(pts, 1) == 10.0  # small work is no faster than the smallest profiled
    assert interpolate(pts, 2) == 10.0
    assert interpolate(pts, 3) == pytest.approx(15.0)
    assert interpolate(pts, 6) == pytest.approx(22.0)
    assert interpolate(pts, 8) == 24.0


def test_interpolate_extrapolates_with_the_last_slope() -> None:
    pts = ((2, 10.0), (4, 20.0), (8, 24.0))
    assert interpolate(pts, 12) == pytest.approx(28.0)  # slope 1 ms per unit after 8
    assert interpolate(((4, 8.0),), 10) == pytest.approx(20.0)  # one point: proportional


def test_interpolate_never_decreases_on_noisy_points() -> None:
    pts = ((1, 5.0), (2, 4.0), (4, 6.0), (8, 5.5))  # measured dips
    values = [interpolate(pts, x / 4) for x in range(4, 48)]
    assert all(b >= a for a, b in zip(values, values[1:], strict=False))
    assert interpolate(pts, 2) == 5.0  # the dip reads as flat
    assert interpolate(pts, 16) == 6.0  # a falling last segment does not extrapolate down


def test_profile_methods_interpolate_their_tables() -> None:
    assert ENCODER.latency_ms(3) == pytest.approx(4.0)
    assert ENCODER.latency_ms(32) == pytest.approx(33.0)
    assert LLM.prefill_time_ms(40) == pytest.approx(5.0)
    assert LLM.tbt_time_ms(8) == pytest.approx(2.4 + 0.8 * 4 / 12)


def test_tables_are_sorted_and_keys_made_int() -> None:
    enc = EncoderProfile(4, {"8": 3.0, "1": 1.0, 2: "2"})  # type: ignore[dict-item]
    assert list(enc.batch_latency_ms.items()) == [(1, 1.0), (2, 2.0), (8, 3.0)]


# capacities


def test_encoder_capacity_is_the_best_batch_within_the_budget() -> None:
    # budget 0.5 * 20 = 10 ms: batches 1..8 fit; 8 * 16 tokens / 9 ms is the best rate
    assert ENCODER.capacity_tokens_per_s(20.0) == pytest.approx(8 * 16 * 1000 / 9.0)
    # budget 5 ms: batches 1, 2, 4 fit; 4 * 16 / 5 ms
    assert ENCODER.capacity_tokens_per_s(10.0) == pytest.approx(4 * 16 * 1000 / 5.0)
    assert ENCODER.capacity_tokens_per_s(10.0, latency_share=1.0) == pytest.approx(
        8 * 16 * 1000 / 9.0)
    assert ENCODER.capacity_tokens_per_s(1000.0) == pytest.approx(16 * 16 * 1000 / 17.0)


def test_encoder_capacity_below_any_batch_is_the_smallest_batch() -> None:
    assert ENCODER.capacity_tokens_per_s(1.0) == pytest.approx(16 * 1000 / 2.0)


def test_llm_capacity_prefill_only() -> None:
    # TTFT 40 ms: budget 20 ms, the 256-token prefill fits: 14 ms / 256 tokens
    assert LLM.capacity_tokens_per_s(40.0, 50.0) == pytest.approx(256 * 1000 / 14.0)
    # TTFT 20 ms: budget 10 ms, 64 tokens in 6 ms
    assert LLM.capacity_tokens_per_s(20.0, 50.0) == pytest.approx(64 * 1000 / 6.0)
    # nothing fits: the smallest prefill
    assert LLM.capacity_tokens_per_s(2.0, 50.0) == pytest.approx(16 * 1000 / 4.0)


def test_llm_capacity_charges_decode_at_the_largest_batch_within_the_tbt_slo() -> None:
    per_prompt_ms = 14.0 / 256
    # TBT SLO 5 ms: batch 16 (3.2 ms) is the largest that fits: 0.2 ms a decode token
    cap = LLM.capacity_tokens_per_s(40.0, 5.0, decode_tokens_per_prompt_token=0.5)
    assert cap == pytest.approx(1000 / (per_prompt_ms + 0.5 * 3.2 / 16))
    # TBT SLO 10 ms: batch 32 fits (6.4 / 32 = 0.2 ms a token, the same)
    assert LLM.capacity_tokens_per_s(40.0, 10.0, 0.5) == pytest.approx(cap)
    # TBT SLO 2.2 ms: only batch 1, 2 ms a token: decode dominates
    slow = LLM.capacity_tokens_per_s(40.0, 2.2, 0.5)
    assert slow == pytest.approx(1000 / (per_prompt_ms + 0.5 * 2.0))
    assert slow < cap
    # a TBT SLO below every batch: batch 1 all the same
    assert LLM.capacity_tokens_per_s(40.0, 0.5, 0.5) == pytest.approx(slow)
    # a negative decode ratio is no decode
    assert LLM.capacity_tokens_per_s(40.0, 5.0, -1.0) == pytest.approx(256 * 1000 / 14.0)


def test_capacity_grows_with_the_slo() -> None:
    caps = [ENCODER.capacity_tokens_per_s(slo) for slo in (2, 5, 10, 20, 40, 80)]
    assert caps == sorted(caps) and caps[-1] > caps[0]
    llm = [LLM.capacity_tokens_per_s(slo, 50.0, 0.1) for slo in (5, 10, 20, 40)]
    assert llm == sorted(llm) and llm[-1] > llm[0]


@pytest.mark.parametrize("slo, share", [(0.0, 0.5), (-5.0, 0.5), (10.0, 0.0), (10.0, 1.5)])
def test_bad_slo_is_an_error(slo: float, share: float) -> None:
    with pytest.raises(ValueError):
        ENCODER.capacity_tokens_per_s(slo, share)
    with pytest.raises(ValueError):
        LLM.capacity_tokens_per_s(slo, 50.0, latency_share=share)
    with pytest.raises(ValueError, match="tbt_slo_ms"):
        LLM.capacity_tokens_per_s(100.0, slo if slo <= 0 else -1.0)


# construction errors


@pytest.mark.parametrize("table", [{}, {0: 1.0}, {1: 0.0}, {1: -2.0}, {1: float("nan")},
                                   {1: float("inf")}])
def test_bad_tables_are_errors(table: dict[int, float]) -> None:
    with pytest.raises(ValueError):
        EncoderProfile(16, table)
    with pytest.raises(ValueError):
        LLMProfile(Architecture.DECODER_ONLY, table, {1: 1.0})
    with pytest.raises(ValueError):
        LLMProfile(Architecture.DECODER_ONLY, {1: 1.0}, table)


def test_bad_tokens_per_image_and_architecture() -> None:
    with pytest.raises(ValueError, match="tokens_per_image"):
        EncoderProfile(0, {1: 1.0})
    with pytest.raises(ValueError, match="valid"):
        LLMProfile("encoder_decoder", {1: 1.0}, {1: 1.0})  # type: ignore[arg-type]
    assert LLMProfile("cross_attention", {1: 1.0}, {1: 1.0}).architecture is (  # type: ignore[arg-type]
        Architecture.CROSS_ATTENTION)


# JSON


def test_json_round_trip_through_text() -> None:
    p = profiles()
    data = json.loads(json.dumps(p.to_json()))
    assert data["format_version"] == FORMAT_VERSION
    assert data["encoder"]["batch_latency_ms"] == {"1": 2.0, "2": 3.0, "4": 5.0, "8": 9.0,
                                                   "16": 17.0}
    back = StageProfiles.from_json(data)
    assert back == p
    assert back.llm.capacity_tokens_per_s(40, 5, 0.5) == p.llm.capacity_tokens_per_s(40, 5, 0.5)
    assert back.metadata["p95"] == {"1": 2.5}


def test_json_of_another_version_is_refused_with_the_command() -> None:
    data = profiles().to_json()
    for version in (None, 0, FORMAT_VERSION + 1, "1"):
        data["format_version"] = version
        with pytest.raises(ValueError, match="adaptserve profile --stages"):
            StageProfiles.from_json(data)


@pytest.mark.parametrize("mutate", [
    lambda d: d.pop("encoder"),
    lambda d: d["llm"].pop("tbt_ms"),
    lambda d: d["encoder"].update(batch_latency_ms={"1": -1.0}),
    lambda d: d["llm"].update(architecture="mixture"),
    lambda d: d["llm"].update(prefill_ms={"x": 1.0}),
    lambda d: d.update(encoder=[1, 2]),
])
def test_malformed_json_is_a_value_error(mutate: object) -> None:
    data = json.loads(json.dumps(profiles().to_json()))
    mutate(data)  # type: ignore[operator]
    with pytest.raises(ValueError):
        StageProfiles.from_json(data)


def test_non_object_json_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="JSON object"):
        StageProfiles.from_json([1, 2])  # type: ignore[arg-type]


def test_encoder_capacity_stops_at_the_replicas_batch_limit() -> None:
    from policies.generation.stage_profile import EncoderProfile

    e = EncoderProfile(16, {1: 4.0, 8: 10.0, 16: 17.0})
    assert e.capacity_tokens_per_s(1000.0) == 16 * 16 * 1000.0 / 17.0
    assert e.capacity_tokens_per_s(1000.0, max_batch_images=8) == 8 * 16 * 1000.0 / 10.0
