"""The single-request benchmark's pure parts (figures, ramp rule, capacity, checks, report) and
its FastAPI + torch floor, without Ray; the load generator against the fake server of
tests/helpers/fake_server.py."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from app.sim.replica.request_metrics import RequestRecord, summarize
from bench.core.client import build_payloads, run_load
from bench.core.run_report import write_json
from bench.experiments.single_request.metrics import (
    Capacity,
    FrontRun,
    RampRule,
    front_run,
    pick_capacity,
    ramp_done,
)
from bench.experiments.single_request.report import checks, plot, report, table
from tests.helpers.fake_server import FakeServer, loadgen_config


def _rec(i: int, outcome: str, latency_ms: float | None, **kw: Any) -> RequestRecord:
    return RequestRecord(index=i, scheduled_s=0.1 * i, sent_s=0.1 * i, outcome=outcome,
                         latency_ms=latency_ms, **kw)


def test_front_run_counts_refusals_and_compares_the_two_verdicts() -> None:
    recs = [_rec(0, "ok", 50.0, server_deadline_met=True),
            _rec(1, "ok", 150.0, server_deadline_met=True),  # the server thinks it made it
            _rec(2, "ok", 90.0, server_deadline_met=True),
            _rec(3, "deadline_exceeded", 120.0, server_deadline_met=False),
            _rec(4, "refused", 2.0, status_code=429, retry_after_s=1.0),
            _rec(5, "refused", 4.0, status_code=503),
            _rec(6, "shed", 3.0), _rec(7, "timeout", None)]
    s = summarize(recs, duration_s=2.0, slo_ms=100.0)
    r = front_run("x", s, recs)
    assert (r.sent, r.answered, r.ok, r.refused, r.deadline_exceeded, r.shed, r.errors) == (
        8, 7, 3, 2, 1, 1, 1)
    assert r.attainment == pytest.approx(2 / 8)
    assert r.attainment_admitted == pytest.approx(2 / 5)  # 8 - 2 refused - 1 shed
    assert r.server_attainment_admitted == pytest.approx(3 / 5)
    assert r.gap_pts == pytest.approx(20.0)
    assert r.goodput_qps == pytest.approx(1.0)
    assert r.refusal_p99_ms == 4.0  # nearest rank: an observed refusal time
    assert r.refusals_with_retry_after == 1
    quiet = front_run("q", summarize(recs[:1], 1.0, 100.0), recs[:1])
    assert math.isnan(quiet.refusal_p99_ms) and quiet.gap_pts == 0.0


def _step(name: str, offered: float, goodput: float, attainment: float,
          **kw: Any) -> FrontRun:
    base: dict[str, Any] = dict(
        name=name, offered_qps=offered, duration_s=10.0, sent=int(10 * offered),
        answered=int(10 * offered), ok=int(10 * offered), refused=0, deadline_exceeded=0,
        shed=0, errors=0, attainment=attainment, attainment_admitted=attainment,
        goodput_qps=goodput, p50_ms=40.0, p99_ms=120.0, refusal_p99_ms=math.nan,
        refusals_with_retry_after=0, server_attainment_admitted=attainment, gap_pts=0.0)
    return FrontRun(**{**base, **kw})


def test_ramp_stops_when_attainment_drops_or_goodput_stalls() -> None:
    rule = RampRule()
    a, b = _step("r0", 20, 20, 1.0), _step("r1", 28, 28, 0.99)
    assert not ramp_done([], rule) and not ramp_done([a], rule) and not ramp_done([a, b], rule)
    assert ramp_done([a, b, _step("r2", 39, 36, 0.93)], rule)  # below 95%
    assert ramp_done([a, b, _step("r2", 39, 28.5, 0.97)], rule)  # adds under 3%
    assert pick_capacity([a, b, _step("r2", 39, 36, 0.93)], rule) == Capacity(28, "r1", 28)
    # a step under the bar never sets the capacity, however much it delivered
    assert pick_capacity([a, _step("r1", 28, 27, 0.96), _step("r2", 39, 30, 0.8)],
                         rule) == Capacity(27, "r1", 28)
    assert pick_capacity([_step("r0", 20, 10, 0.5)], rule) is None
    assert ramp_done([_step("r0", 20, 10, 0.5)], RampRule(min_attainment=0.4)) is False


def _out(runs: list[FrontRun], baseline: dict[str, Any] | None = None) -> dict[str, Any]:
    ramp = [_step("app_ramp_0", 20, 20, 1.0), _step("app_ramp_1", 28, 28, 0.99)]
    out: dict[str, Any] = {
        "commit": "abc1234", "settings": {"family": "family", "slo_ms": 200.0},
        "app": {"ramp": ramp, "capacity": pick_capacity(ramp, RampRule()), "runs": runs},
        "torch": {"ramp": [_step("torch_ramp_0", 20, 20, 1.0)],
                  "capacity": Capacity(20.0, "torch_ramp_0", 20.0)}}
    if baseline is not None:
        out["baseline"] = baseline
    out["checks"] = checks(out)
    return out


def test_checks_against_the_issue_targets(tmp_path: Path) -> None:
    good = [_step("app_1x", 28, 28, 1.0),
            _step("app_2x", 56, 27, 0.48, attainment_admitted=0.97, refused=280,
                  refusal_p99_ms=8.0, gap_pts=-1.5),
            _step("app_3x", 84, 26, 0.31, attainment_admitted=0.96, refused=560,
                  refusal_p99_ms=12.0, gap_pts=1.0)]
    out = _out(good, baseline={"qps": 10.0, "step": "app_ramp_3", "offered_qps": 11.0})
    # the floor and the app at 2x and 3x the floor's capacity: correct answers in time per s
    out["torch"]["runs"] = [_step("torch_2x", 40, 12, 0.3, correct_qps=11.0),
                            _step("torch_3x", 60, 8, 0.13, correct_qps=7.5)]
    out["app_at_torch"] = [_step("app_at_torch_2x", 40, 38, 0.95, correct_qps=35.0),
                           _step("app_at_torch_3x", 60, 27, 0.45, correct_qps=11.0)]
    c = out["checks"] = checks(out)
    assert c["correct_over_torch"] == {"2x": pytest.approx(35 / 11), "3x": pytest.approx(11 / 7.5)}
    assert c["correct_over_torch_min"] == pytest.approx(11 / 7.5)
    assert c["pass"]["correct_vs_torch>=1.5"] is False  # 1.47x at 3x
    out["app_at_torch"][1] = _step("app_at_torch_3x", 60, 27, 0.45, correct_qps=25.0)
    c = out["checks"] = checks(out)
    assert "app_at_torch_3x" in report(out) and "torch_2x" in report(out)
    assert c["capacity_app_qps"] == 28 and c["app_over_torch"] == pytest.approx(1.4)
    assert c["app_over_baseline"] == pytest.approx(2.8)
    assert c["goodput_3x_over_1x"] == pytest.approx(26 / 28)
    assert c["refusal_p99_ms_max"] == 12.0 and c["gap_pts_max_abs"] == 1.5
    assert all(c["pass"].values())
    # today's shape: no refusals, collapse at 3x, the server's clock starting late
    bad = [_step("app_1x", 28, 28, 0.97), _step("app_2x", 56, 5, 0.1, gap_pts=60.0),
           _step("app_3x", 84, 1, 0.01, gap_pts=80.0)]
    out = _out(bad)
    c = out["checks"]
    assert c["pass"] == {"attainment_admitted>=95%": False, "goodput_3x>=0.9x1x": False,
                         "refusal_p99<20ms": None, "gap<=2pts": False,
                         "capacity>=2x_baseline": None, "correct_vs_torch>=1.5": None}
    text = report(out)
    assert "app_3x" in text and "torch_ramp_0" in text and "abc1234" in text
    assert table(bad).splitlines()[0].split()[:3] == ["run", "offered", "sent"]
    write_json(tmp_path / "front.json", out)
    saved = json.loads((tmp_path / "front.json").read_text())
    assert saved["app"]["capacity"]["qps"] == 28 and saved["app"]["runs"][2]["gap_pts"] == 80
    assert checks({**out, "baseline": saved["app"]["capacity"]})["app_over_baseline"] == 1.0
    plot(out, tmp_path / "front.png")
    assert (tmp_path / "front.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_capacity_leaves_the_multiples_unmeasured() -> None:
    c = _out([])["checks"]
    assert c["attainment_admitted_min"] is None and c["goodput_3x_over_1x"] is None


def test_front_run_from_a_load_against_a_refusing_server(server: FakeServer) -> None:
    cfg = loadgen_config(server.url, qps=40.0, duration_s=0.5, slo_ms=100.0)
    result = run_load(cfg, build_payloads([({"pred": 1}, 1), ({"mode": "429"}, 0)], cfg))
    r = front_run("f", result.summary, result.records)
    assert (r.sent, r.ok, r.refused) == (20, 10, 10)
    assert r.attainment_admitted == 1.0 and r.server_attainment_admitted == 1.0
    assert r.gap_pts == 0.0 and r.refusals_with_retry_after == 10
    refused_ms = [x.latency_ms for x in result.records if x.outcome == "refused"]
    assert len(refused_ms) == 10 and all(ms is not None and ms > 0 for ms in refused_ms)
    assert min(refused_ms) <= r.refusal_p99_ms <= max(refused_ms)  # type: ignore[type-var]


def test_torch_floor_answers_in_the_apps_shape(trained_models_dir: Path) -> None:
    from fastapi.testclient import TestClient

    from bench.experiments.single_request.fastapi_floor import TorchServerSettings, create_app
    from deployments.ingress.classify.schemas import ClassifyResponse
    from deployments.models.registry import load_model

    settings = TorchServerSettings(8299, "family", "family/cnn-xl", str(trained_models_dir),
                                   expected_accuracy=0.96)
    assert settings.argv()[:3] == [sys.executable, "-m", "bench.experiments.single_request.fastapi_floor"]
    example = load_model("family", trained_models_dir).examples("test", "digits", limit=1)[0]
    client = TestClient(create_app(settings))
    assert client.get("/healthz").json() == {"status": "ok"}
    r = client.post("/v1/classify", json={"model": "family", "inputs": example.inputs,
                                          "slo": {"latency_ms": 200}})
    assert r.status_code == 200
    res = ClassifyResponse.model_validate(r.json())
    assert res.status == "ok" and res.decision is not None and res.prediction is not None
    assert res.decision.variant == "family/cnn-xl" and res.decision.batch_size == 1
    assert res.decision.deadline_met is (res.latency_ms <= 200)
    assert res.decision.expected_accuracy == 0.96
    with pytest.raises(ValueError, match="valid"):
        create_app(TorchServerSettings(8299, "family", "nope", str(trained_models_dir)))
