"""The one simulator-vs-live comparison (bench/experiments/fidelity/compare.py) both paths'
fidelity targets judge with."""

from __future__ import annotations

import pytest

from bench.experiments.fidelity.compare import INF, Comparison, checks, table


def test_absolute_tolerance_in_the_metrics_unit() -> None:
    near = Comparison("classify", "family/quiet/2x", "violations %", 10.0, 11.5, 2.0)
    far = Comparison("classify", "family/quiet/2x", "violations %", 10.0, 12.5, 2.0)
    assert near.error == pytest.approx(1.5) and near.ok is True and near.why == "within 2"
    assert far.ok is False and far.why == "outside 2"


def test_relative_tolerance_is_a_fraction_of_live() -> None:
    c = Comparison("generation", "monolith@16rps", "P99 TTFT ms", 1000.0, 1250.0, 0.2,
                   relative=True)
    assert c.error == pytest.approx(0.25) and c.ok is False
    assert Comparison("generation", "x", "P99 TTFT ms", 1000.0, 850.0, 0.2, True).ok is True


def test_saturation_agrees_only_with_saturation() -> None:
    assert Comparison("generation", "x", "p99", INF, INF, 0.2, True).ok is True
    assert Comparison("generation", "x", "p99", INF, 900.0, 0.2, True).ok is False
    assert Comparison("generation", "x", "p99", 900.0, INF, 0.2, True).why == (
        "sim saturated, live not")


def test_the_calibration_run_is_shown_not_judged() -> None:
    c = Comparison("classify", "app_ramp_1", "refused %", 0.0, 30.0, 2.0, calibration=True)
    assert c.ok is None and c.why == "outside 2"
    [check] = checks([c])
    assert check.ok is None and check.name == "classify/app_ramp_1/refused %"


def test_checks_and_table_count_the_judged() -> None:
    rows = [Comparison("classify", "a", "accuracy %", 90.0, 91.0, 2.0),
            Comparison("classify", "a", "violations %", 5.0, 9.0, 2.0),
            Comparison("classify", "ramp", "violations %", 5.0, 9.0, 2.0, calibration=True)]
    assert [c.ok for c in checks(rows)] == [True, False, None]
    assert table(rows).splitlines()[-1] == "within tolerance: 1 of 2 judged"
    both = Comparison("generation", "full@52rps", "P99 TTFT ms", INF, INF, 0.2, True)
    assert table([*rows, both]).splitlines()[-1] == (
        "within tolerance: 2 of 3 judged (1 of them: both saturated)")
