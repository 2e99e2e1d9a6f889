"""policies/autoscaling: the token arithmetic, hysteresis, the forecast over the startup delay,
the SLO floor, and the stages coordinated (no LLM scale-up for an image-only burst)."""

from __future__ import annotations

import pytest

from policies.autoscaling import (
    ENCODER,
    LLM,
    AppScalingSettings,
    History,
    Reason,
    ScalingSettings,
    ScalingState,
    StageLoads,
    StageView,
    coordinate,
    decide,
    initial_replicas,
    replicas_for,
)


def settings(**kw: float) -> ScalingSettings:
    base = {"capacity_tokens_per_s": 100.0, "min_replicas": 1, "max_replicas": 8,
            "scale_down_delay_s": 30.0, "startup_s": 0.0}
    return ScalingSettings(**{**base, **kw})  # type: ignore[arg-type]


def test_replicas_are_the_ceiling_of_load_over_capacity_within_bounds() -> None:
    s = settings()
    assert [replicas_for(x, s) for x in (0, 1, 100, 100.5, 250, 10_000)] == [1, 1, 1, 2, 3, 8]
    assert replicas_for(150, settings(target_utilization=0.5)) == 3
    assert replicas_for(0, settings(min_replicas=0)) == 0


def test_scales_up_at_once() -> None:
    d = decide(settings(), 1, 350.0, 0.0, ScalingState())
    assert (d.replicas, d.reason) == (4, Reason.UP)


def test_scales_down_only_after_the_load_stayed_low_for_the_delay() -> None:
    s = settings(scale_down_delay_s=30.0)
    state = ScalingState()
    d = decide(s, 4, 100.0, 0.0, state)
    assert (d.replicas, d.reason) == (4, Reason.HOLD_DELAY)
    d = decide(s, 4, 250.0, 20.0, d.state)  # a bump inside the window: 3 were needed
    assert (d.replicas, d.reason) == (4, Reason.HOLD_DELAY)
    d = decide(s, 4, 100.0, 29.0, d.state)
    assert d.replicas == 4
    d = decide(s, 4, 100.0, 30.0, d.state)
    assert (d.replicas, d.reason) == (3, Reason.DOWN)  # the window's peak, not today's 1
    d = decide(s, 3, 100.0, 31.0, d.state)  # the next step waits for a new window
    assert (d.replicas, d.reason) == (3, Reason.HOLD_DELAY)
    d = decide(s, 3, 100.0, 61.0, d.state)
    assert (d.replicas, d.reason) == (1, Reason.DOWN)


def test_a_load_back_at_the_current_size_restarts_the_window() -> None:
    s = settings(scale_down_delay_s=10.0)
    d = decide(s, 2, 50.0, 0.0, ScalingState())
    d = decide(s, 2, 150.0, 5.0, d.state)
    assert d.reason is Reason.STEADY
    d = decide(s, 2, 50.0, 12.0, d.state)
    assert (d.replicas, d.reason) == (2, Reason.HOLD_DELAY)


def test_no_scale_down_soon_after_a_scale_up() -> None:
    s = settings(scale_down_delay_s=5.0, startup_s=20.0)
    d = decide(s, 1, 300.0, 0.0, ScalingState())
    assert d.replicas == 3
    d = decide(s, 3, 50.0, 10.0, d.state)
    d = decide(s, 3, 50.0, 20.0, d.state)
    assert (d.replicas, d.reason) == (3, Reason.HOLD_STARTUP)
    d = decide(s, 3, 50.0, 25.0, d.state)
    assert (d.replicas, d.reason) == (1, Reason.DOWN)


def test_a_rising_load_is_forecast_over_the_startup_delay() -> None:
    slow, fast = settings(startup_s=0.0), settings(startup_s=30.0)
    out = {}
    for name, s in (("slow", slow), ("fast", fast)):
        state, d = ScalingState(), None
        for t, load in ((0.0, 100.0), (10.0, 150.0), (20.0, 200.0)):
            d = decide(s, 2, load, t, state)
            state = d.state
        out[name] = d
    assert out["slow"].replicas == 2 and out["slow"].forecast_tokens_per_s == 200.0
    assert out["fast"].forecast_tokens_per_s == 300.0  # 350 by the trend, capped at 1.5x
    assert out["fast"].replicas == 3
    uncapped = settings(startup_s=30.0, max_forecast_ratio=10.0)
    state = ScalingState()
    for t, load in ((0.0, 100.0), (10.0, 150.0), (20.0, 200.0)):
        d = decide(uncapped, 2, load, t, state)
        state = d.state
    assert d.forecast_tokens_per_s == 350.0 and d.replicas == 4
    falling = decide(slow, 2, 100.0, 10.0, decide(slow, 2, 200.0, 0.0, ScalingState()).state)
    assert falling.forecast_tokens_per_s == 100.0  # a falling load is not extrapolated


def test_slo_attainment_under_the_floor_adds_one_replica_per_startup() -> None:
    s = settings(startup_s=10.0)
    d = decide(s, 2, 150.0, 0.0, ScalingState(), slo_attainment=0.95)
    assert (d.replicas, d.reason) == (3, Reason.UP_SLO)
    d = decide(s, 3, 150.0, 5.0, d.state, slo_attainment=0.95)
    assert d.replicas == 3  # the last one has not come up yet
    d = decide(s, 3, 150.0, 11.0, d.state, slo_attainment=0.95)
    assert d.replicas == 4
    assert decide(s, 8, 150.0, 0.0, ScalingState(), slo_attainment=0.5).replicas == 8


def test_bounds_changed_below_the_current_count_apply_at_once() -> None:
    d = decide(settings(max_replicas=3), 6, 1000.0, 0.0, ScalingState())
    assert (d.replicas, d.reason) == (3, Reason.DOWN)
    assert decide(settings(min_replicas=2), 1, 0.0, 0.0, ScalingState()).replicas == 2


def test_one_step_up_does_not_order_a_fleet() -> None:
    s = settings(startup_s=25.0, trend_window_s=10.0)
    d = decide(s, 1, 0.0, 0.0, ScalingState())
    d = decide(s, 1, 90.0, 0.1, d.state)  # one large request lands in an idle window
    assert d.forecast_tokens_per_s == pytest.approx(135.0) and d.replicas == 2


@pytest.mark.parametrize("bad", [{"capacity_tokens_per_s": 0.0}, {"min_replicas": 9},
                                 {"max_forecast_ratio": 0.5},
                                 {"target_utilization": 1.5}, {"startup_s": -1.0},
                                 {"slo_attainment_floor": 2.0}])
def test_bad_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        settings(**bad)


def app_settings(arch: str = "decoder_only") -> AppScalingSettings:
    return AppScalingSettings(encoder=settings(capacity_tokens_per_s=1000.0),
                              llm=settings(capacity_tokens_per_s=5000.0),
                              architecture=arch)  # type: ignore[arg-type]


def views(enc: int = 1, llm: int = 1) -> dict[str, StageView]:
    return {ENCODER: StageView(enc, enc), LLM: StageView(llm, llm)}


def test_an_image_only_burst_scales_the_encoders_not_the_llm() -> None:
    burst = StageLoads(image_tokens_per_s=4500.0, text_tokens_per_s=1000.0,
                       llm_image_tokens_per_s=4500.0)
    d = coordinate(app_settings(), views(), burst, 0.0)
    # the one running encoder delivers at most 1000 image tokens/s: 2000 tokens/s at the LLM
    assert d[ENCODER].replicas == 5 and d[LLM].replicas == 1
    d = coordinate(app_settings(), views(enc=5), burst, 10.0)
    assert d[LLM].replicas == 2  # decoder-only: once delivered, image tokens cost prefill
    d = coordinate(app_settings("cross_attention"), views(enc=5), burst, 10.0)
    assert d[LLM].replicas == 1  # cross-attention: they do not


def test_text_load_scales_the_llm() -> None:
    d = coordinate(app_settings(), views(), StageLoads(text_tokens_per_s=12_000.0), 0.0)
    assert (d[ENCODER].replicas, d[LLM].replicas) == (1, 3)


def test_the_monolith_counts_images_at_the_llm() -> None:
    loads = StageLoads(text_tokens_per_s=1000.0, llm_image_tokens_per_s=9000.0)
    d = coordinate(app_settings(), {LLM: StageView(1, 1)}, loads, 0.0)
    assert set(d) == {LLM} and d[LLM].replicas == 2
    # its own vision tower: images cost a cross-attention monolith too, at their weight
    d = coordinate(app_settings("cross_attention"), {LLM: StageView(1, 1)}, loads, 0.0)
    assert d[LLM].replicas == 2
    cheap = AppScalingSettings(encoder=settings(capacity_tokens_per_s=1000.0),
                               llm=settings(capacity_tokens_per_s=5000.0),
                               monolith_image_token_cost=0.25)
    assert coordinate(cheap, {LLM: StageView(1, 1)}, loads, 0.0)[LLM].replicas == 1


def test_coordinate_refuses_unknown_stages() -> None:
    with pytest.raises(ValueError, match="valid|only"):
        coordinate(app_settings(), {"decoder": StageView(1, 1), LLM: StageView(1, 1)},
                   StageLoads(), 0.0)


def test_initial_replicas_from_history() -> None:
    h = History(image_qps=[10.0, 40.0, 20.0], encode_latency_s=[0.1, 0.15, 0.2],
                request_qps=[5.0, 6.0, 7.0], images_per_request=[2.0, 3.0, 4.0],
                text_tokens_per_request=[100.0, 200.0, 300.0])
    # encoders: 20 images/s x 0.15 s = 3 in service; LLM: 6 x (200 + 3 x 1000) / 5000 -> 4
    assert initial_replicas(h, app_settings(), tokens_per_image=1000) == {ENCODER: 3, LLM: 4}
    # cross-attention: 6 x 200 / 5000 -> 1
    assert initial_replicas(h, app_settings("cross_attention"), 1000)[LLM] == 1
    with pytest.raises(ValueError, match="no image_qps"):
        initial_replicas(History([], [0.1], [1.0], [1.0], [1.0]), app_settings(), 16)
