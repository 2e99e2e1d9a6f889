"""The benchmark core: one percentile, the Result record, the CLI's registry and repeats."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench.__main__ import EXPERIMENTS, kept_repeat, main, summarise
from bench.core.cli import experiment_parser
from bench.core.result import Check, Run, all_ok, checks_from_flags, read_result
from bench.core.stats import percentile, percentile_or_nan


def test_percentile_is_nearest_rank_and_keeps_the_tail() -> None:
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 99) == 99.0 and percentile(values, 50) == 50.0
    assert percentile(values, 100) == 100.0 and percentile(values, 1) == 1.0
    assert percentile([5.0], 99) == 5.0 and percentile([], 50) is None
    assert percentile([1.0, 2.0, math.inf], 99) == math.inf  # no answer stays in the tail
    assert math.isnan(percentile_or_nan([], 99))


def test_result_has_header_settings_checks_data(tmp_path: Path) -> None:
    run = Run()
    out = tmp_path / "r.json"
    run.write(out, {"x": 1.5, "bad": math.nan}, settings={"rate": 2},
              checks=[Check("ratio", 2.1, ">= 2.0", True)])
    raw = json.loads(out.read_text())
    assert set(raw) == {"header", "settings", "checks", "data"}
    head = raw["header"]
    assert head["cores"] >= 1 and len(head["load_avg_start"]) == 3
    assert head["utc_start"] <= head["utc_end"] and isinstance(head["dirty"], bool)
    assert raw["data"] == {"x": 1.5, "bad": None}  # non-finite numbers become null
    assert raw["checks"] == [{"name": "ratio", "value": 2.1, "target": ">= 2.0", "ok": True}]
    assert read_result(out) == raw


def test_an_older_record_reads_as_data(tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"runs": [1, 2]}))
    assert read_result(old) == {"header": {}, "settings": {}, "checks": [],
                                "data": {"runs": [1, 2]}}


def test_checks_from_flags_and_all_ok() -> None:
    checks = checks_from_flags({"a": True, "b": None, "c": False})
    assert [c.ok for c in checks] == [True, None, False]
    assert not all_ok(checks) and all_ok(checks[:2])


def test_shared_flags_are_named_once_and_unknown_ones_refused() -> None:
    p = experiment_parser("x", out="results/x.json", seed=3)
    args = p.parse_args([])
    assert args.out == Path("results/x.json") and args.seed == 3
    assert p.parse_args(["--out", "y.json"]).out == Path("y.json")
    with pytest.raises(ValueError, match="shared flags"):
        experiment_parser("x", outt="a")


def test_repeats_summarise_median_range_and_majority() -> None:
    runs = [{"checks": [{"name": "ratio", "value": v, "target": ">= 2", "ok": v >= 2}]}
            for v in (1.8, 2.2, 2.5)]
    (check,) = summarise(runs)
    assert check.value["median"] == 2.2 and check.value["min"] == 1.8
    assert check.value["max"] == 2.5 and check.ok is True
    runs[1]["checks"][0].update(value=1.9, ok=False)
    assert summarise(runs)[0].ok is False


def test_a_repeat_is_kept_only_when_the_same_command_wrote_it(tmp_path: Path) -> None:
    argv = ["--family", "f", "--out", str(tmp_path / "x.json")]
    path = tmp_path / "x.r1.json"
    assert not kept_repeat(path, "adaptive-vs-static", argv)  # not there
    def write(command: str) -> None:
        path.write_text(json.dumps({"header": {"command": command}, "settings": {},
                                    "checks": [], "data": {}}))
    write("python bench/__main__.py --repeats 3 adaptive-vs-static " + " ".join(argv))
    assert kept_repeat(path, "adaptive-vs-static", argv)
    assert not kept_repeat(path, "adaptive-vs-static", ["--family", "g", *argv[2:]])
    assert not kept_repeat(path, "single-request", argv)
    write("python bench/__main__.py adaptive-vs-static " + " ".join(argv))  # not a repeat
    assert not kept_repeat(path, "adaptive-vs-static", argv)
    path.write_text("not json")
    assert not kept_repeat(path, "adaptive-vs-static", argv)


def test_every_registered_experiment_imports_and_has_main() -> None:
    import importlib

    for name, (module, _) in EXPERIMENTS.items():
        assert callable(importlib.import_module(module).main), name


def test_unknown_experiment_is_refused_with_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["no-such-experiment"])
    assert "adaptive-vs-static" in capsys.readouterr().err


def test_finish_writes_and_says_whether_every_judged_check_held(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = Run()
    ok = run.finish(tmp_path / "a.json", {"x": 1}, settings={},
                    checks=[Check("c", 1, True, True), Check("d", None, True, None)])
    bad = run.finish(tmp_path / "b.json", {"x": 1}, settings={},
                     checks=[Check("c", 0, True, False)], also=(tmp_path / "b.png",))
    assert (ok, bad) == (0, 1)
    assert read_result(tmp_path / "b.json")["checks"][0]["ok"] is False
    assert f"wrote {tmp_path / 'b.json'}, {tmp_path / 'b.png'}" in capsys.readouterr().out
