"""Load generator against a tiny local aiohttp server (the fake stands in for the HTTP peer)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from app.sim.replica.request_metrics import RequestRecord, summarize
from app.sim.traces.spec import TraceSpec, arrival_times
from bench.core import http
from bench.core.client import (
    build_payloads,
    format_summary,
    request_start_value,
    retry_after_s,
    run_load,
    trace_data_dir,
)
from bench.core.run_report import plot_runs, write_json
from profiling.paths import shared_data_dir
from tests.conftest import needs_shared
from tests.helpers.fake_server import FakeServer, loadgen_config


@pytest.fixture
def slow_server() -> Iterator[FakeServer]:
    s = FakeServer(delay_s=0.4).start()
    yield s
    s.stop()


def test_every_request_recorded_with_its_outcome(server: FakeServer) -> None:
    items = [({"mode": "ok", "pred": 1}, 1), ({"mode": "ok", "pred": 0}, 1),
             ({"mode": "shed"}, 2), ({"mode": "deadline_exceeded"}, 2), ({"mode": "500"}, 0),
             ({"mode": "hang"}, 0)]
    cfg = loadgen_config(server.url, qps=30.0, duration_s=1.0, timeout_s=0.8)
    result = run_load(cfg, build_payloads(items, cfg))
    recs = result.records
    assert sorted(r.index for r in recs) == list(range(30))
    s = result.summary
    assert (s.sent, s.ok, s.shed, s.deadline_exceeded, s.errors, s.timeouts) == (30, 10, 5, 5, 5, 5)
    assert s.answered == 20
    assert s.satisfied == 10 and s.goodput_qps == pytest.approx(10.0)
    assert s.slo_attainment == pytest.approx(10 / 30)
    assert s.slo_attainment_admitted == pytest.approx(10 / 25)
    assert s.accuracy_of_satisfied == pytest.approx(0.5)  # every other ok answer is wrong
    assert s.expected_accuracy_of_satisfied == pytest.approx(0.9)
    assert s.variant_share == {"big": 1.0}
    errs = [r for r in recs if r.outcome == "error"]
    assert all(r.status_code == 500 and "boom" in (r.error or "") for r in errs)
    assert all(r.latency_ms is None and r.status_code == 0
               for r in recs if r.outcome == "timeout")
    assert "deadline_exceeded" in format_summary(s)


def test_open_loop_sends_on_schedule_regardless_of_answers(slow_server: FakeServer) -> None:
    cfg = loadgen_config(slow_server.url, qps=50.0, duration_s=1.0)
    payloads = build_payloads([({"pred": 0}, 0)], cfg)
    result = run_load(cfg, payloads)
    recs = result.records
    assert len(recs) == 50 and result.summary.ok == 50
    # A closed loop has one request in flight at a time (each answer takes 0.4 s); an open
    # loop keeps sending on schedule while the answers are out
    assert slow_server.max_in_flight >= 10
    lags = np.array([r.sent_s - r.scheduled_s for r in recs])
    assert lags.min() >= -1e-3  # never sent before its time
    sched = np.array([r.scheduled_s for r in recs])
    assert np.allclose(np.diff(sched), 0.02)
    assert all(r.latency_ms is not None and r.latency_ms >= 390.0 for r in recs)
    assert result.summary.overhead_p50_ms == pytest.approx(result.summary.latency_p50_ms - 10.0)


def test_jobs_record_every_item(server: FakeServer, tmp_path: Any) -> None:
    cfg = loadgen_config(server.url, qps=10.0, duration_s=1.0, job_size=3)
    payloads = build_payloads([({"pred": k % 2}, 0) for k in range(6)], cfg)
    assert len(payloads) == 2
    assert json.loads(payloads[1].body)["items"][0] == {"pred": 1}
    result = run_load(cfg, payloads)
    assert sorted(r.index for r in result.records) == list(range(30))
    assert all(r.job_id == "j1" and r.outcome == "ok" for r in result.records)
    write_json(tmp_path / "run.json", result.to_dict())
    loaded = json.loads((tmp_path / "run.json").read_text())
    assert len(loaded["records"]) == 30 and loaded["summary"]["sent"] == 30
    plot_runs({"jobs": result.series}, cfg.slo_ms, tmp_path / "run.png")
    assert (tmp_path / "run.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unreachable_server_counts_errors() -> None:
    cfg = loadgen_config("http://127.0.0.1:9", qps=20.0, duration_s=0.5, timeout_s=2.0)
    result = run_load(cfg, build_payloads([({"pred": 0}, 0)], cfg))
    assert result.summary.sent == 10 and result.summary.errors == 10
    assert result.summary.goodput_qps == 0.0


def test_sync_helper_reads_status_headers_and_json(server: FakeServer) -> None:
    r = http.post_json(server.url + "/v1/classify", {"inputs": {"pred": 1}})
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert r.json()["prediction"]["label"] == 1
    r = http.post_bytes(server.url + "/v1/classify", b'{"inputs": {"mode": "500"}}')
    assert r.status_code == 500 and "boom" in r.text
    assert http.get(server.url + "/v1/classify").status_code == 405
    with pytest.raises(http.HttpTransportError, match="127.0.0.1:9"):
        http.get("http://127.0.0.1:9/healthz", timeout_s=2.0)


def test_payload_body_follows_the_wire_format() -> None:
    cfg = loadgen_config("http://x", 1.0, 1.0, min_accuracy=0.8, task="t", slo_ms=150.0)
    body = json.loads(build_payloads([({"image": "abc"}, 3)], cfg)[0].body)
    assert body == {"model": "m", "task": "t", "inputs": {"image": "abc"},
                    "slo": {"latency_ms": 150.0, "min_accuracy": 0.8}}


def test_summary_math_on_hand_made_records() -> None:
    def rec(i: int, outcome: str, lat: float | None, **kw: Any) -> RequestRecord:
        return RequestRecord(index=i, scheduled_s=0.5 * i, sent_s=0.5 * i + 0.001,
                             outcome=outcome, latency_ms=lat, **kw)

    recs = [rec(0, "ok", 50.0, label=1, predicted=1, variant="a", compute_ms=20.0, batch_size=1),
            rec(1, "ok", 90.0, label=1, predicted=0, variant="b", compute_ms=30.0, batch_size=3),
            rec(2, "ok", 150.0, label=1, predicted=1, variant="b", compute_ms=40.0, batch_size=2),
            rec(3, "shed", 1.0), rec(4, "timeout", None), rec(5, "error", 3.0)]
    s = summarize(recs, duration_s=3.0, slo_ms=100.0)
    assert (s.sent, s.answered, s.ok, s.satisfied) == (6, 4, 3, 2)
    assert s.goodput_qps == pytest.approx(2 / 3)
    assert s.slo_attainment_admitted == pytest.approx(2 / 5)
    assert s.accuracy_of_satisfied == pytest.approx(0.5)
    assert s.latency_p50_ms == pytest.approx(90.0)
    assert s.overhead_p50_ms == pytest.approx(60.0)
    assert s.mean_batch_size == pytest.approx(2.0)
    assert s.variant_share == pytest.approx({"a": 1 / 3, "b": 2 / 3})
    assert s.max_send_lag_ms == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown outcomes"):
        summarize([rec(0, "lost", None)], 1.0, 1.0)


def test_trace_specs() -> None:
    assert arrival_times(TraceSpec("constant", 4.0, 2.0)).tolist() == [i / 4 for i in range(8)]
    p1 = arrival_times(TraceSpec("poisson", 100.0, 5.0, seed=1))
    assert np.array_equal(p1, arrival_times(TraceSpec("poisson", 100.0, 5.0, seed=1)))
    assert 400 < p1.size < 600 and p1.max() < 5.0
    with pytest.raises(ValueError, match="trace"):
        TraceSpec("bursty", 1.0, 1.0)
    assert trace_data_dir(TraceSpec("poisson", 1.0, 1.0), "/nonexistent") is None


@needs_shared  # the Twitter slice lives in ../shared/data/ramsis
def test_twitter_trace_spec() -> None:
    spec = TraceSpec("twitter", 50.0, 60.0, peak_qps=150.0, seed=0)
    assert trace_data_dir(spec) == shared_data_dir()
    with pytest.raises(FileNotFoundError, match="nonexistent"):
        trace_data_dir(spec, "/nonexistent")
    tw = arrival_times(spec, shared_data_dir())
    per_s = np.bincount(tw.astype(int), minlength=60)
    assert 40 < per_s.mean() < 160 and tw.max() < 60.0


def test_request_start_header_carries_the_send_time(server: FakeServer) -> None:
    assert request_start_value(1732435200.1234567) == "t=1732435200.123457"
    cfg = loadgen_config(server.url, qps=20.0, duration_s=0.5)
    before = time.time()
    run_load(cfg, build_payloads([({"pred": 0}, 0)], cfg))
    after = time.time()
    assert len(server.request_starts) == 10
    for value in server.request_starts:
        assert value is not None and re.fullmatch(r"t=\d+\.\d{6}", value)
        assert before <= float(value[2:]) <= after
    server.request_starts.clear()
    cfg = loadgen_config(server.url, qps=20.0, duration_s=0.5, request_start_header=False)
    run_load(cfg, build_payloads([({"pred": 0}, 0)], cfg))
    assert server.request_starts == [None] * 10


def test_refusals_are_their_own_outcome_with_retry_after(server: FakeServer) -> None:
    items = [({"mode": "ok", "pred": 1}, 1), ({"mode": "429"}, 1), ({"mode": "proxy_503"}, 0),
             ({"mode": "deadline_exceeded"}, 0)]
    cfg = loadgen_config(server.url, qps=40.0, duration_s=1.0)
    result = run_load(cfg, build_payloads(items, cfg))
    s = result.summary
    assert (s.sent, s.ok, s.refused, s.deadline_exceeded, s.errors) == (40, 10, 20, 10, 0)
    assert s.answered == 40
    assert s.slo_attainment_admitted == pytest.approx(10 / 20)  # refusals are not admitted
    refused = [r for r in result.records if r.outcome == "refused"]
    assert sorted({r.status_code for r in refused}) == [429, 503]
    assert {r.retry_after_s for r in refused if r.status_code == 429} == {2.0}
    assert {r.retry_after_s for r in refused if r.status_code == 503} == {None}
    assert all(r.latency_ms is not None and r.latency_ms > 0 for r in refused)
    assert "backpressure" in next(r.error or "" for r in refused if r.status_code == 503)
    by_outcome = {r.outcome: r.server_deadline_met for r in result.records}
    assert by_outcome == {"ok": True, "refused": None, "deadline_exceeded": False}
    assert retry_after_s("3") == 3.0 and retry_after_s(None) is None
    assert retry_after_s("Wed, 21 Oct 2026 07:28:00 GMT") is None
    assert "refused" in format_summary(s)
