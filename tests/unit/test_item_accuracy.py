"""The simulator's accuracy on the items a run sent (bench/experiments/adaptive_vs_static/item_accuracy.py): which item a
record carries (the load generator cycles through its items), what counts (answered ok within
the SLO), variants the table lacks, and the checks that prefer it to the profile's accuracy."""

from __future__ import annotations

import pytest

from app.sim.replica.request_metrics import RequestRecord, summarize
from bench.experiments.adaptive_vs_static.item_accuracy import (
    ItemTable,
    measure_items,
    same_items_1x,
)
from bench.experiments.adaptive_vs_static.report import checks


def _rec(i: int, variant: str | None, latency_ms: float = 50.0,
         outcome: str = "ok") -> RequestRecord:
    return RequestRecord(index=i, scheduled_s=0.0, sent_s=0.0, outcome=outcome,
                         latency_ms=latency_ms, variant=variant, expected_accuracy=0.5)


TABLE = ItemTable({"big": (True, True, False, True), "small": (False, True, False, False)})


def test_record_index_wraps_over_the_items_the_load_generator_cycles() -> None:
    assert TABLE.items == 4
    assert [TABLE.right("big", i) for i in range(6)] == [True, True, False, True, True, True]
    assert TABLE.right("small", 5) is True and TABLE.right("other", 0) is None
    assert TABLE.by_variant() == {"big": 0.75, "small": 0.25}


def test_accuracy_counts_items_answered_in_time_on_their_own_variant() -> None:
    recs = [_rec(0, "big"), _rec(1, "small"), _rec(2, "big"), _rec(3, "small"),
            _rec(4, "big", latency_ms=250.0),  # late: not counted
            _rec(5, None, outcome="refused"), _rec(6, "other")]  # refused; unknown variant
    # counted: big@0 right, small@1 right, big@2 wrong, small@3 wrong -> 2 of 4
    assert TABLE.accuracy(recs, slo_ms=200.0) == pytest.approx(0.5)
    assert TABLE.accuracy([_rec(0, None, outcome="refused")], 200.0) is None


def test_checks_compare_live_accuracy_with_the_sim_s_on_the_same_items() -> None:
    live = [_rec(i, "big") for i in range(8)]
    for r in live:
        object.__setattr__(r, "label", 1)
        object.__setattr__(r, "predicted", 1 if TABLE.right("big", r.index) else 0)
    s_live = summarize(live, 1.0, 200.0)
    sim_recs = [_rec(i, "big") for i in range(8)]
    s_sim = summarize(sim_recs, 1.0, 200.0)
    out = {"runs": {"static_2x": s_live, "x_2x": s_live}, "overhead": {"ratio": 1.0},
           "memory": {"total_mib": 1.0}, "sim": {"sim_static_2x": s_sim, "sim_x_2x": s_sim}}
    # on the profile's expected accuracy (0.5) the live 0.75 looks 25 points off
    assert checks(out, "x")["sim_x_2x_accuracy_diff_pts"] == pytest.approx(25.0)
    out["sim_item_accuracy"] = {"sim_x_2x": TABLE.accuracy(sim_recs, 200.0)}
    res = checks(out, "x")
    assert res["sim_x_2x_accuracy_diff_pts"] == pytest.approx(0.0)
    assert res["fidelity"]["sim_x_2x"]["accuracy_sim_expected"] == pytest.approx(0.5)


def _answered(i: int, variant: str, right: bool, latency_ms: float = 50.0) -> RequestRecord:
    r = _rec(i, variant, latency_ms)
    object.__setattr__(r, "label", 1)
    object.__setattr__(r, "predicted", 1 if right else 0)
    return r


def test_the_1x_accuracy_given_up_is_judged_on_the_items_the_adaptive_run_answered() -> None:
    # the adaptive run answered items 0, 1, 2 in time (small, right on 1 only; big right on 0)
    # and item 3 late: the static ("big") would have been right on 0 and 1 of the three
    recs = [_answered(0, "big", True), _answered(1, "small", True),
            _answered(2, "small", False), _answered(3, "big", True, latency_ms=900.0)]
    found = same_items_1x(TABLE, recs, "big", 200.0)
    assert found is not None and found["items"] == 3
    assert found["static_accuracy"] == pytest.approx(2 / 3)
    assert found["adaptive_accuracy"] == pytest.approx(2 / 3)
    assert found["gap_pts"] == pytest.approx(0.0)
    worse = [_answered(0, "small", False), *recs[1:]]
    assert same_items_1x(TABLE, worse, "big", 200.0)["gap_pts"] == pytest.approx(100 / 3)
    assert same_items_1x(TABLE, recs, "other", 200.0) is None  # a variant the table lacks
    # the checks judge it beside the comparison of each run's own answers
    s = summarize(recs, 1.0, 200.0)
    out = {"runs": {"static_2x": s, "x_2x": s, "x_1x": s}, "overhead": {"ratio": 1.0},
           "memory": {"total_mib": 1.0}, "sim": {}, "accuracy_1x_same_items": {
               **same_items_1x(TABLE, worse, "big", 200.0)}}
    res = checks(out, "x")
    assert res["accuracy_1x_gap_same_items_pts"] == pytest.approx(100 / 3)
    assert res["pass"]["accuracy_1x_same_items_within_1pt"] is False
    assert res["pass"]["accuracy_1x_within_1pt"] is True  # the same runs: no gap


def test_measure_items_runs_every_variant_on_the_load_generator_s_items() -> None:
    from tests.conftest import MODELS_DIR  # the cache build_app reads, from the repo root

    if not (MODELS_DIR / "family.json").exists():
        pytest.skip(f"the family's trained models are not in {MODELS_DIR} (bash scripts/run.sh "
                    "builds them)")
    table = measure_items("family", MODELS_DIR, limit=16)
    assert table.items == 16 and len(table.correct) >= 2
    assert all(len(right) == 16 for right in table.correct.values())
    # trained digit classifiers (10 classes): the best variant is far above chance (0.1)
    assert max(table.by_variant().values()) >= 0.5, table.by_variant()
