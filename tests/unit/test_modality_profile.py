"""A measured `Profile` read as a MOSEL profile (mosel_profile_from_profile), end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.sim.mosel.profiles import mosel_profile_from_profile
from app.sim.mosel.report import mosel_table, plot_mosel, run_mosel_suite
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant
from profiling.paths import shared_data_dir
from tests.conftest import needs_shared

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _points(fixed_ms: float, per_ms: float) -> tuple[LatencyPoint, ...]:
    # Sparse, measured-like: a few batch sizes with different percentiles.
    return tuple(LatencyPoint(b, fixed_ms + per_ms * b, 1.2 * (fixed_ms + per_ms * b),
                              1.3 * (fixed_ms + per_ms * b), fixed_ms + per_ms * b, 50)
                 for b in (1, 4, 16, 32))


def _variant(mods: tuple[str, ...], acc: float, fixed: float, per: float,
             model: str = "fusion") -> VariantProfile:
    return VariantProfile(Variant("+".join(mods) or "nothing", model, frozenset(mods)), acc,
                          _points(fixed, per))


def hand_built() -> Profile:
    return Profile("fusion-measured", "cpu", (
        _variant(("audio",), 0.70, 2.0, 3.0),
        _variant(("audio", "image"), 0.78, 16.0, 30.0),
        _variant(("image",), 0.66, 14.0, 27.0),
    ))


def test_mapping_reads_combinations_latency_and_all_modality_variant() -> None:
    m = mosel_profile_from_profile(hand_built(), percentile="p95", max_batch_size=32)
    assert m.combinations[m.all_modality_index] == frozenset({"audio", "image"})
    assert m.model.names == ("audio", "audio+image", "image")
    assert m.model.accuracy == (0.70, 0.78, 0.66)
    assert m.model.latency(1, 4) == pytest.approx(1.2 * (16.0 + 120.0) / 1000)  # p95, seconds
    # b=8 was not measured: filled from the line through the measured p95s (exact here)
    assert m.model.latency(0, 8) == pytest.approx(1.2 * (2.0 + 3.0 * 8) / 1000)


@pytest.mark.parametrize(("variants", "match"), [
    ((("audio",), ("image",)), "all modalities"),
    ((("audio",), ("audio",), ("audio", "image")), "twice"),
    (((),), "without modalities"),
])
def test_mapping_rejects_profiles_mosel_cannot_read(variants: tuple[tuple[str, ...], ...],
                                                   match: str) -> None:
    prof = Profile("bad", "cpu", tuple(_variant(v, 0.7, 1.0, 1.0) for v in variants))
    with pytest.raises(ValueError, match=match):
        mosel_profile_from_profile(prof)


def test_mapping_rejects_several_models() -> None:
    prof = Profile("mixed", "cpu", (_variant(("audio",), 0.7, 1, 1, "a"),
                                    _variant(("audio", "image"), 0.8, 1, 2, "b")))
    with pytest.raises(ValueError, match="several models"):
        mosel_profile_from_profile(prof)


@needs_shared  # the load follows the Twitter trace in ../shared/data
def test_suite_runs_on_a_profile_json(tmp_path: Path) -> None:
    path = tmp_path / "fusion.json"
    path.write_text(json.dumps(hand_built().to_dict()))
    suite = run_mosel_suite([str(path)], seeds=[0], policies=("optimized", "random", "none"),
                            data_dir=shared_data_dir())
    run = suite["experiments"][str(path)]["runs"][0]
    assert run["profile"] == "fusion-measured"
    assert run["variants"] == ["audio", "audio+image", "image"]
    # the workload scales with the profile: peak = 2 x its all-modality capacity
    assert max(run["qps_steps"]) == pytest.approx(2 * run["all_modality_capacity_qps"])
    policies = run["policies"]
    assert all(p["requests"] == run["num_requests"] for p in policies.values())
    assert policies["optimized"]["met_both_slos"] > 2 * policies["none"]["met_both_slos"]
    assert "optimized" in mosel_table(suite)
    plot_mosel(suite, tmp_path / "mosel.png")
    assert (tmp_path / "mosel.png").read_bytes()[:8] == PNG_SIGNATURE


def test_cli_mosel_with_profile_writes_table_json_png(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.__main__ import main
    from bench.core.result import read_result

    path = tmp_path / "fusion.json"
    path.write_text(json.dumps(hand_built().to_dict()))
    out = tmp_path / "out"
    assert main(["mosel", "--profile", str(path), "--seeds", "0", "--replan-jobs", "5",
                 "--replan-trials", "5", "--gekko-sizes", "2", "--gekko-levels", "2",
                 "--out", str(out / "mosel.json")]) == 0
    printed = capsys.readouterr().out
    assert "optimized-violator-drop" in printed and "x none" in printed
    suite = read_result(out / "mosel.json")["data"]
    assert list(suite["experiments"]) == [str(path)]
    assert (out / "mosel.png").read_bytes()[:8] == PNG_SIGNATURE
