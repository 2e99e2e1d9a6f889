"""The reliability benchmark's operational phases, their pure parts: answer kinds, percentiles,
RSS windows and groups, the kill / slow-header / soak figures and rows, the soak's rate, and
the slow-header client against socket servers that play a server that never closes and one
that does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bench.experiments.reliability import report_ops as ops
from bench.experiments.reliability.phases import soak_target
from bench.experiments.reliability.report import figures, table
from bench.experiments.reliability.settings import ReliabilitySettings
from bench.experiments.reliability.stats import (
    answer_kind,
    kinds,
    mean_in,
    rss_groups,
    window_mean,
)
from bench.workloads.hostile_clients import header_head, slow_header_client

UNAVAILABLE = json.dumps({"error": {"type": "unavailable", "message": "no live replica"}})


def rec(sent_s: float, status: int, latency_ms: float | None = 20.0, outcome: str = "ok",
        error: str | None = None, retry_after_s: float | None = None) -> dict[str, Any]:
    return {"index": 0, "scheduled_s": sent_s, "sent_s": sent_s, "outcome": outcome,
            "latency_ms": latency_ms, "status_code": status, "error": error,
            "retry_after_s": retry_after_s}


def refusal(sent_s: float, latency_ms: float) -> dict[str, Any]:
    return rec(sent_s, 503, latency_ms, "refused", UNAVAILABLE, 1.0)


def test_answer_kinds() -> None:
    assert answer_kind(rec(0, 200)) == "200"
    assert answer_kind(refusal(0, 5)) == "503 unavailable"
    over = json.dumps({"error": {"type": "overloaded", "message": "x"}})
    assert answer_kind(rec(0, 429, 3, "refused", over)) == "429 overloaded"
    assert answer_kind(rec(0, 500, 3, "error", "HTTP 500: internal_error: boom")) == \
        "500 internal_error"
    assert answer_kind(rec(0, 503, 3, "refused", "Service Unavailable")) == "503 ?"
    assert answer_kind(rec(0, 0, None, "timeout")) == "timeout"
    assert answer_kind(rec(0, 0, None, "error", "ClientConnectorError")) == "connection error"
    assert kinds([rec(0, 200), rec(1, 200), refusal(2, 4)]) == {"200": 2, "503 unavailable": 1}


def test_windows() -> None:
    samples = [(0.0, {"proxy": 100.0}), (1.0, {"proxy": 110.0, "ingress": 50.0}),
               (9.0, {"proxy": 200.0})]
    assert window_mean(samples, 0.0, 1.0) == {"proxy": 105.0, "ingress": 50.0}
    assert window_mean(samples, 2.0, 3.0) == {}
    assert mean_in([(0.0, 1.0), (1.0, 3.0), (5.0, 9.0)], 0.0, 2.0) == 2.0
    assert mean_in([(0.0, 1.0)], 2.0, 3.0) is None


def test_rss_groups_sum_classifier_replicas() -> None:
    g = rss_groups({"ProxyActor#1": 100.0, "ServeReplica:adaptserve:Ingress#2": 50.0,
                    "ServeReplica:adaptserve:Classifier_vit#3": 300.0,
                    "ServeReplica:adaptserve:Classifier_vit#4": 200.0,
                    "ServeReplica:adaptserve:Controller#5": 80.0})
    assert g == {"proxy": 100.0, "ingress": 50.0, "Classifier_vit": 500.0}


def kill_phase(gap_503_ms: float, other_misses: int, lost: int = 0) -> dict[str, Any]:
    """vit killed at 3 s: 503s from 3 to 10 s, 200 again from 10.05 s; fusion all along."""
    vit = [rec(0.1 * i, 200) for i in range(30)]  # before the kill
    vit.append(refusal(2.95, 400.0))  # in flight at the kill: slower
    vit += [refusal(3.0 + 0.1 * i, gap_503_ms) for i in range(70)]
    vit += [rec(10.05 + 0.1 * i, 200) for i in range(50)]
    fusion = [rec(0.1 * i, 200, 900.0 if 40 <= i < 40 + other_misses else 30.0)
              for i in range(150)]
    fusion += [rec(15.0, 0, None, "error", "ServerDisconnectedError")] * lost
    polls = [[3.5, 200, "down"], [9.0, 200, "starting"], [10.5, 200, "up"]]
    return {"name": "kill_classifier", "start_s": 100.0, "load_start_s": 100.2, "end_s": 130.0,
            "single_s": 30.0, "singles": {"vit": vit, "fusion": fusion},
            "kill": {"family": "vit", "kill_s": 3.0, "polls": polls,
                     "probe_ok_after_kill_s": 31.0}}


def quiet_phase() -> dict[str, Any]:
    return {"name": "quiet", "start_s": 0.0, "load_start_s": 0.2, "end_s": 10.0,
            "single_s": 10.0, "singles": {"vit": [rec(0.1 * i, 200) for i in range(100)],
                                          "fusion": [rec(0.1 * i, 200) for i in range(100)]}}


def run_of(*phases: dict[str, Any], samples: list[Any] | None = None) -> dict[str, Any]:
    return {"slo_ms": {"vit": 200.0, "fusion": 200.0, "family": 200.0},
            "body_read_timeout_s": 20.0, "max_body_bytes": 8 << 20,
            "phases": [quiet_phase(), *phases], "rss_samples": samples or []}


def test_kill_classifier_figures() -> None:
    f = ops.kill_classifier_figures(kill_phase(12.0, 0), {"vit": 200.0, "fusion": 200.0})
    assert f["once"]["sent"] == f["once"]["answered"] == 301 and not f["once"]["bad"]
    assert f["gap_503"] == 70 and f["gap_503_p99_ms"] == 12.0
    assert f["gap_503_retry_after"] == 70 and f["in_flight_503"] == 1
    assert f["recover_s"] == pytest.approx(10.05 + 0.02 - 3.0) and f["recovered_by"] == "load"
    assert f["healthz_down_s"] == pytest.approx(0.5) and f["healthz_up_s"] == pytest.approx(7.5)
    assert f["others_gap_attainment"] == {"fusion": 1.0}
    p = kill_phase(12.0, 0)
    p["singles"]["vit"].append(refusal(3.05, 300.0))  # sent before the ingress knew
    f = ops.kill_classifier_figures(p, {"vit": 200.0, "fusion": 200.0})
    assert f["gap_503_p99_ms"] == 300.0 and f["settled_503_p99_ms"] == 12.0


def test_kill_classifier_rows_pass_and_fail() -> None:
    fig = figures(run_of(kill_phase(12.0, 0)))
    assert fig["passed"], table(fig)
    failing = {(150.0, 0, 0): ["kill_classifier: 503 in the gap"],
               (12.0, 20, 0): ["kill_classifier: other families in the gap"],
               (12.0, 0, 2): ["kill_classifier: answered once"]}
    for (ms, misses, lost), rows in failing.items():
        fig = figures(run_of(kill_phase(ms, misses, lost)))
        assert [r["row"] for r in fig["rows"] if r["passed"] is False] == rows, table(fig)


def test_kill_classifier_recovery_from_the_probe() -> None:
    p = kill_phase(12.0, 0)
    p["singles"]["vit"] = [r for r in p["singles"]["vit"] if r["sent_s"] < 10.0]
    f = ops.kill_classifier_figures(p, {"vit": 200.0, "fusion": 200.0})
    assert f["recover_s"] == 31.0 and f["recovered_by"] == "probe"
    p["kill"]["probe_ok_after_kill_s"] = None
    f = ops.kill_classifier_figures(p, {"vit": 200.0, "fusion": 200.0})
    assert f["recover_s"] is None
    assert not ops.kill_classifier_rows(f, {"vit": 1.0, "fusion": 1.0})[2].passed


def controller_phase(refused_at: list[float], back: bool) -> dict[str, Any]:
    recs = [rec(0.1 * i, 200) for i in range(200)]
    over = json.dumps({"error": {"type": "overloaded", "message": "x"}})
    recs += [rec(t, 429, 5.0, "refused", over) for t in refused_at]
    polls = [[2.0, 200, ""], [3.6, 503, "controller_unavailable"]]
    polls += [[14.0, 200, ""]] if back else []
    return {"name": "kill_controller", "start_s": 200.0, "load_start_s": 200.2,
            "end_s": 230.0, "single_s": 20.0, "singles": {"vit": recs},
            "kill": {"kill_s": 3.0, "polls": polls, "probe_ok_after_kill_s": None}}


def test_kill_controller_figures_and_rows() -> None:
    f = ops.kill_controller_figures(controller_phase([4.0, 6.0], back=True))
    assert f["not_200"] == 2 and f["last_not_200_s"] == pytest.approx(3.005)
    assert f["first_not_200_s"] == pytest.approx(1.005)
    assert f["status_down_s"] == pytest.approx(0.6) and f["status_back_s"] == pytest.approx(11.0)
    assert f["once"]["bad"] == {}
    rows = ops.kill_controller_rows(f, {"vit": 0.99}, {"vit": 1.0})
    assert [r.passed for r in rows] == [True, True, True]
    f = ops.kill_controller_figures(controller_phase([], back=False))
    assert f["not_200"] == 0 and f["status_back_s"] is None
    assert ops.kill_controller_rows(f, {"vit": 0.9}, {"vit": 1.0})[1].passed is False
    assert ops.kill_controller_rows(f, {"vit": 1.0}, {"vit": 1.0})[2].passed is False


def test_slow_header_summary() -> None:
    answers = [{"status": None, "answer_s": None, "closed": False, "sent_bytes": 90,
                "error": None, "closed_s": None}] * 3
    answers += [{"status": 408, "answer_s": 10.0, "closed": True, "sent_bytes": 70,
                 "error": None, "closed_s": 10.1},
                {"status": None, "answer_s": None, "closed": False, "sent_bytes": 0,
                 "error": "connect: OSError: too many", "closed_s": None}]
    f = ops.slow_header_summary(answers, 30.0)
    assert f["open_at_give_up"] == 3 and f["server_closed"] == 1 and f["connect_errors"] == 1
    assert f["status_codes"] == {"408": 1} and f["server_closed_s_max"] == 10.1
    assert "closed by the server 1/5" in ops.slow_header_row(f).measured


def soak_phase(n: int, late: int) -> dict[str, Any]:
    recs = [rec(0.01 * i, 200, 900.0 if i < late else 40.0) for i in range(n)]
    return {"name": "soak", "start_s": 1000.0, "load_start_s": 1000.0, "end_s": 1300.0,
            "single_s": 300.0, "singles": {"family": recs},
            "soak": {"family": "family", "qps": 85.5, "capacity_qps": 106.875,
                     "warmup_s": 60.0, "window_s": 60.0}}


def soak_samples(last_proxy: float) -> list[Any]:
    first = [(1000.0 + t, {"proxy": 100.0, "ingress": 200.0, "Classifier_family": 500.0})
             for t in range(60, 121, 5)]
    last = [(1000.0 + t, {"proxy": last_proxy, "ingress": 201.0, "Classifier_family": 505.0})
            for t in range(240, 301, 5)]
    mid = [(1000.0 + 180, {"proxy": 999.0})]  # outside both windows: not counted
    return first + mid + last


def test_soak_figures_and_rows() -> None:
    fig = figures({**run_of(soak_phase(1000, 10), samples=soak_samples(104.0)), "phases":
                   [soak_phase(1000, 10)]})
    f = fig["phases"]["soak"]["soak"]
    assert f["rss_growth"]["proxy"] == pytest.approx(0.04)
    assert f["rss_growth"]["Classifier_family"] == pytest.approx(0.01)
    assert fig["phases"]["soak"]["attainment"] == {"family": 0.99}
    assert fig["passed"], table(fig)
    assert "0.80 x 106.9" in table(fig)
    fig = figures({**run_of(samples=soak_samples(106.0)), "phases": [soak_phase(1000, 10)]})
    assert [r["row"] for r in fig["rows"] if r["passed"] is False] == ["soak: RSS growth"]


def test_soak_target(tmp_path: Path) -> None:
    front = {"settings": {"family": "family", "slo_ms": 200.0},
             "app": {"capacity": {"qps": 100.0}}}
    t = soak_target(ReliabilitySettings(), front)
    assert t["family"] == "family" and t["qps"] == pytest.approx(80.0)
    t = soak_target(ReliabilitySettings(soak_qps=12.0, soak_family="vit"), None)
    assert t == {"family": "vit", "qps": 12.0, "capacity_qps": None, "source": "--soak-qps"}
    with pytest.raises(ValueError, match="--soak-qps"):
        soak_target(ReliabilitySettings(), None)


async def _never_answers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while await reader.read(1024):
        pass


HEAD_BYTES = len(header_head("/v1/classify"))
DRIPS = 3  # header bytes the closing server waits for after the head
PERIOD_S = 0.05


async def _closes_after(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Closes, without answering, once the head and DRIPS more header bytes are in."""
    got = 0
    while got < HEAD_BYTES + DRIPS and (chunk := await reader.read(1024)):
        got += len(chunk)
    writer.close()


def test_slow_header_client_gives_up_or_sees_the_close() -> None:
    async def go(handler: Any, give_up_s: float) -> Any:
        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await slow_header_client("127.0.0.1", port, "/v1/classify", PERIOD_S,
                                            give_up_s)

    held = asyncio.run(go(_never_answers, 1.0))
    assert held.status is None and not held.closed and held.sent_bytes > 50
    closed = asyncio.run(go(_closes_after, 30.0))  # 30 s: a guard, the close comes first
    assert closed.status is None and closed.closed and closed.closed_s is not None
    assert closed.sent_bytes >= HEAD_BYTES + DRIPS  # it kept dripping until the close
    assert closed.closed_s >= DRIPS * PERIOD_S - 0.01  # each drip waited its period first
