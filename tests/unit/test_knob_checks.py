"""The adaptive-vs-static experiment's judged figures beside goodput: correct answers within the
SLO per second (against the true labels) and the accuracy kept at 1x."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bench.experiments.adaptive_vs_static.report import checks


def run(goodput: float, accuracy: float) -> SimpleNamespace:
    return SimpleNamespace(goodput_qps=goodput, accuracy_of_satisfied=accuracy,
                           slo_attainment_admitted=1.0)


def out(one_x_accuracy: float) -> dict[str, object]:
    return {"runs": {"static_2x": run(10.0, 0.93), "ramsis_1x": run(18.0, one_x_accuracy),
                     "ramsis_2x": run(30.0, 0.90)},
            "sim": {}, "overhead": {"ratio": 1.0}, "memory": {"total_mib": 100.0}}


def test_correct_answers_in_time_and_the_accuracy_kept_at_1x() -> None:
    res = checks(out(0.925), "ramsis")
    assert res["correct_ratio"] == pytest.approx(30 * 0.90 / (10 * 0.93))
    assert res["accuracy_1x_gap_pts"] == pytest.approx(0.5)
    assert res["pass"]["correct_ratio>=1.5"] and res["pass"]["accuracy_1x_within_1pt"]
    worse = checks(out(0.90), "ramsis")  # 3 points below the static at 1x
    assert worse["pass"]["accuracy_1x_within_1pt"] is False


def test_goodput_alone_does_not_pass_wrong_answers() -> None:
    o = out(0.93)
    o["runs"]["ramsis_2x"] = run(30.0, 0.40)  # type: ignore[index]  # 3x goodput, wrong answers
    res = checks(o, "ramsis")
    assert res["pass"]["goodput_ratio>=2"] and not res["pass"]["correct_ratio>=1.5"]
