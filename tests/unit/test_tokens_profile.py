"""A measured `Profile` read by OTAS (token_profile_from_profile), the load setups, the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.sim.otas.experiment import run_otas_experiment, token_profile_from_profile
from app.sim.otas.profile import figure4_profile, table_i_efficiency, throughput_qps
from app.sim.otas.trace import PAPER_LEVEL_SKEW, rate_per_second
from bench.__main__ import main
from bench.core.result import read_result
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant


def vit(gammas: tuple[int, ...] = (-8, 0, 4), model: str = "vit-b") -> Profile:
    """A single-model token-adaptive ViT: one variant per gamma, latency at a few sizes."""
    variants = []
    for g in gammas:
        per = 1.0 + 0.05 * g  # ms per image: merging (g < 0) faster, prompts slower
        pts = tuple(LatencyPoint(b, 3 + per * b, 3.5 + per * b, 4 + per * b, 3 + per * b, 20)
                    for b in (1, 8, 32))
        variants.append(VariantProfile(Variant(f"{model}/g{g}", model, gamma=g),
                                       0.9 + 0.005 * g, pts))
    return Profile("vit-measured", "cpu", tuple(variants))


def test_single_model_serves_every_task() -> None:
    tp = token_profile_from_profile(vit())
    assert tp.gammas == (-8, 0, 4) and tp.tasks == ("vit-b",) and tp.max_batch_size == 32
    gi = tp.gamma_index(0)
    assert tp.task_accuracy("cifar100", gi) == pytest.approx(0.9)  # any task -> the one model
    assert tp.batch_latency_s({"cifar10": 8}, gi) == pytest.approx((3.5 + 8) / 1000)  # p95
    assert tp.batch_latency_s({"eurosat": 4}, 0) < tp.batch_latency_s({"eurosat": 4}, 2)


def test_duplicate_gamma_is_rejected() -> None:
    prof = vit((0,))
    dup = Profile("dup", "cpu", prof.variants + (VariantProfile(
        Variant("other", "vit-b", gamma=0), 0.9, prof.variants[0].latency),))
    with pytest.raises(ValueError, match="two variants"):
        token_profile_from_profile(dup)


def test_measured_profile_runs_the_experiment(tmp_path: Path) -> None:
    path = tmp_path / "vit.json"
    path.write_text(json.dumps(vit().to_dict()))
    report = run_otas_experiment(duration_s=3, seed=1, profile_json=path, max_qps=300,
                                 policies=["otas-alg2", "fixed0"])
    assert report["config"]["profile"] == str(path)
    assert report["policies"]["otas-alg2"]["num_queries"] == report["config"]["num_queries"]


def test_table_i_calibration() -> None:
    eff = table_i_efficiency()
    assert 0.61 < eff < 0.66
    sustained = 64 * 1000 / figure4_profile().by_name("cifar10/g+0").latency[-1].mean_ms
    assert sustained == pytest.approx(throughput_qps(0) * eff)  # ~366 req/s, Table I: 350-379
    raw = figure4_profile(serving_efficiency=1.0).by_name("cifar10/g+0").latency[-1].mean_ms
    assert 64 * 1000 / raw == pytest.approx(580.0)


def test_paper_trace_is_mostly_low_with_bursts() -> None:
    import random

    rates = rate_per_second(20000, 200, 700, random.Random(0), PAPER_LEVEL_SKEW)
    assert 295 < sum(rates) / len(rates) < 330  # paper: ~1.46e5 utility / 30 min -> ~313 req/s
    assert max(rates) > 650 and min(rates) == 200
    assert sum(r < 280 for r in rates) / len(rates) > 0.5
    uniform = rate_per_second(20000, 200, 700, random.Random(0), 1.0)
    assert 430 < sum(uniform) / len(uniform) < 470


def test_cli_otas_writes_table_json_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["otas", "--duration-s", "3", "--trials", "5",
                 "--out", str(tmp_path / "otas.json")]) == 0
    out = capsys.readouterr().out
    assert "otas-alg2" in out and "best fixed" in out
    result = read_result(tmp_path / "otas.json")
    assert result["header"]["cores"] >= 1 and result["settings"]["duration_s"] == 3
    assert result["data"]["config"]["setup"] == "paper"
    assert (tmp_path / "otas.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
