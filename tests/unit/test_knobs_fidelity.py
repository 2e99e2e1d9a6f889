"""The simulator-vs-live figure for the three knobs (bench/experiments/fidelity/classify/knobs.py): the
bench_live commands of each cell, the rows read from a run's checks, the 2-point verdict."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.experiments.fidelity.classify.knobs import (
    Row,
    bench_args,
    read_cells,
    repeat_table,
    rows_of,
    summary,
    table,
)


def test_each_cell_is_one_bench_live_run_with_its_machine_state() -> None:
    quiet = bench_args("otas", "quiet", Path("r"))
    busy = bench_args("mosel", "busy", Path("r"))
    assert quiet[:4] == ["--family", "vit", "--policy", "otas"] and "--busy-neighbours" not in quiet
    assert busy[busy.index("--busy-neighbours") + 1] == "1"
    assert busy[busy.index("--min-accuracy") + 1] == "0.70"
    assert busy[busy.index("--out") + 1] == "r/mosel_busy.json"
    with pytest.raises(ValueError, match="knobs"):
        bench_args("nope", "quiet", Path("r"))


def _out(viol_1x: float, viol_2x_sim: float) -> dict:  # type: ignore[type-arg]
    fid = {}
    for load, live_v, sim_v in (("1x", viol_1x, viol_1x + 0.01), ("2x", 0.50, viol_2x_sim)):
        fid[f"simfront_ramsis_{load}"] = {"accuracy_live": 0.90, "accuracy_sim": 0.91,
                                          "violation_live": live_v, "violation_sim": sim_v}
    return {"policy": "ramsis", "checks": {"fidelity": fid},
            "runs": {"ramsis_1x": {"offered_qps": 100.0}, "ramsis_2x": {"offered_qps": 200.0}},
            "sim_inputs": {"simfront": {"neighbour_cores": {"ramsis_1x": 0.1, "ramsis_2x": 0.2}}}}


def test_rows_judge_accuracy_and_violations_within_two_points() -> None:
    rows = rows_of("ramsis", "quiet", _out(0.05, 0.53))
    assert [r.load for r in rows] == ["1x", "2x"]
    assert rows[0].accuracy_diff_pts == pytest.approx(1.0)
    assert rows[0].violation_diff_pts == pytest.approx(1.0) and rows[0].within
    assert rows[1].violation_diff_pts == pytest.approx(3.0) and not rows[1].within
    assert rows[1].neighbour_cores == 0.2
    s = summary(rows, {"ramsis_quiet": "x.json"})
    assert (s["within"], s["cells"]) == (1, 2)
    assert s["max_abs_violation_diff_pts"] == pytest.approx(3.0)
    assert "within 2 points on both: 1 of 2" in table(rows)


def test_the_live_repeat_gap_where_the_adaptive_run_served_the_static_s_variant() -> None:
    out = _out(0.05, 0.5)
    out["runs"]["static_2x"] = {"slo_attainment": 0.60, "variant_share": {"a": 1.0},
                                "offered_qps": 200.0}
    out["runs"]["ramsis_2x"]["variant_share"] = {"a": 0.97, "b": 0.03}
    rows = rows_of("ramsis", "quiet", out)
    assert rows[0].repeat_gap_pts is None  # 1x: no static run at that load
    assert rows[1].repeat_gap_pts == pytest.approx(10.0)  # 40 % vs 50 % violations
    assert summary(rows, {})["live_repeat_gaps_pts"] == [pytest.approx(10.0)]
    assert "live repeat gap" in table(rows)
    out["runs"]["ramsis_2x"]["variant_share"] = {"a": 0.5, "b": 0.5}  # a different mix
    assert rows_of("ramsis", "quiet", out)[1].repeat_gap_pts is None


def test_a_run_without_the_prediction_says_which(tmp_path: Path) -> None:
    out = _out(0.05, 0.5)
    del out["checks"]["fidelity"]["simfront_ramsis_2x"]
    with pytest.raises(ValueError, match="ramsis_2x"):
        rows_of("ramsis", "busy", out)
    (tmp_path / "ramsis_busy.json").write_text(json.dumps(_out(0.05, 0.5)))
    rows, sources = read_cells(tmp_path, ["ramsis", "otas"], ["quiet", "busy"])
    assert [r.state for r in rows] == ["busy", "busy"] and list(sources) == ["ramsis_busy"]
    with pytest.raises(ValueError, match="no runs"):
        read_cells(tmp_path, ["otas"], ["quiet"])


def test_row_is_frozen() -> None:
    r = Row("otas", "quiet", "1x", 1.0, 0.0, 0.9, 0.9, 1.0, 1.0)
    with pytest.raises(AttributeError):
        r.knob = "x"  # type: ignore[misc]


def test_the_same_cells_measured_again_give_the_live_figure_s_own_spread() -> None:
    first = [Row("otas", "quiet", "1x", 1.0, 0.0, 0.85, 0.85, 9.0, 9.5),
             Row("otas", "quiet", "2x", 1.0, 0.0, 0.84, 0.85, 55.0, 56.0)]
    again = [Row("otas", "quiet", "2x", 1.0, 0.0, 0.86, 0.85, 51.5, 56.0),
             Row("mosel", "quiet", "2x", 1.0, 0.0, 0.77, 0.77, 50.0, 50.0)]  # not in `first`
    text, rows = repeat_table(first, again)
    assert len(rows) == 1 and rows[0]["load"] == "2x"
    assert rows[0]["violation_gap_pts"] == pytest.approx(-3.5)
    assert rows[0]["accuracy_gap_pts"] == pytest.approx(2.0)
    assert "-3.50" in text
