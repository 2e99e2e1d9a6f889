"""policies/autoscaling/meter.py: the windowed rate the stage replicas report to the
autoscaler, and the per-report SLO attainment share."""

from __future__ import annotations

import math

import pytest

from policies.autoscaling.meter import RateMeter, ShareSinceLast


def test_a_steady_stream_reads_its_rate() -> None:
    m = RateMeter(window_s=5.0, started_s=0.0)
    t = 0.0
    while t < 20.0:
        m.add(t, 100.0)  # 100 tokens every 0.1 s: 1000 tokens/s
        t = round(t + 0.1, 6)
    assert m.rate(t) == pytest.approx(1000.0, rel=0.03)


def test_a_fresh_meter_divides_by_the_time_it_has_run() -> None:
    m = RateMeter(window_s=5.0, started_s=10.0)
    m.add(10.5, 200.0)
    assert m.rate(11.0) == pytest.approx(200.0)  # 200 in 1 s, not 200 / 5 s
    assert m.rate(10.01) == pytest.approx(200.0 / 0.25)  # at least min_span_s


def test_the_rate_falls_to_zero_once_the_window_passed() -> None:
    m = RateMeter(window_s=2.0, started_s=0.0)
    for i in range(20):
        m.add(i * 0.1, 10.0)  # 100/s over [0, 2)
    assert m.rate(2.0) == pytest.approx(100.0, rel=0.1)
    assert 0 < m.rate(3.0) < 60.0  # half the window is quiet
    assert m.rate(4.1) == 0.0
    assert m.total == pytest.approx(200.0)


def test_a_burst_shows_within_one_bucket() -> None:
    m = RateMeter(window_s=5.0, started_s=0.0, buckets=10)
    for i in range(50):
        m.add(i * 0.1, 1.0)  # 10/s
    for i in range(5):
        m.add(5.0 + i * 0.1, 100.0)  # then 1000/s for half a second
    assert m.rate(5.5) > 100.0


def test_memory_is_bounded_by_the_buckets_whatever_the_traffic() -> None:
    m = RateMeter(window_s=1.0, started_s=0.0, buckets=4)
    for i in range(100_000):
        m.add(i * 0.001, 3.0)
    assert len(m._totals) <= 4


def test_nothing_negative_or_nan_counts_and_a_clock_step_back_is_kept() -> None:
    m = RateMeter(window_s=1.0, started_s=0.0)
    m.add(0.5, -5.0)
    m.add(0.5, math.nan)
    assert m.rate(0.6) == 0.0
    m.add(0.9, 10.0)
    m.add(0.7, 10.0)  # an earlier time than the newest bucket
    assert m.total == 20.0 and m.rate(0.95) == pytest.approx(20.0 / 0.95)


@pytest.mark.parametrize("kw", [{"window_s": 0.0}, {"window_s": math.inf}, {"buckets": 0},
                                {"min_span_s": 0.0}])
def test_bad_settings_are_refused(kw: dict[str, float]) -> None:
    args = {"window_s": 1.0, "started_s": 0.0, **kw}
    with pytest.raises(ValueError):
        RateMeter(**args)  # type: ignore[arg-type]


def test_share_since_last_report() -> None:
    s = ShareSinceLast()
    assert s.take(0, 0) is None  # nothing happened: no evidence
    assert s.take(9, 1) == pytest.approx(0.9)
    assert s.take(9, 1) is None
    assert s.take(19, 1) == 1.0
    assert s.take(0, 0) is None  # counters reset
