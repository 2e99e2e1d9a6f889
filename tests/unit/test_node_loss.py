"""The node-loss benchmark's client (one answer per request, ids echoed, the error type read)
against a small local HTTP server, and its figures from a made-up run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from aiohttp import web
from pytest import approx

from bench.core.answers import outcome_of
from bench.experiments.node_loss.load import Answer, send_load
from bench.experiments.node_loss.report import figures, rows, table
from tests.helpers.local_http import serve_posts


def test_outcome_of_reads_result_status_or_error_type() -> None:
    assert outcome_of(200, b'{"status": "ok"}') == "ok"
    assert outcome_of(503, b'{"error": {"type": "unavailable"}}') == "unavailable"
    assert outcome_of(500, b"Internal Server Error") == "?"


async def _serve_and_load(seconds: float) -> tuple[list[Answer], int]:
    seen: list[str] = []

    async def classify(request: web.Request) -> web.Response:
        rid = request.headers["X-Request-Id"]
        seen.append(rid)
        headers = {"X-Request-ID": rid}
        if len(seen) % 3 == 0:
            return web.json_response({"error": {"type": "unavailable"}}, status=503,
                                     headers=headers)
        return web.json_response({"status": "ok"}, headers=headers)

    runner, url = await serve_posts({"/v1/classify": classify})
    answers: list[Answer] = []
    stop = asyncio.Event()
    asyncio.get_running_loop().call_later(seconds, stop.set)
    await send_load(f"{url}/v1/classify", [b"{}"], 100.0, 0, stop, 5.0,
                    answers)
    await runner.cleanup()
    return answers, len(seen)


def test_send_load_gives_every_request_one_answer_with_its_id() -> None:
    answers, served = asyncio.run(_serve_and_load(0.5))
    assert 20 < len(answers) == served  # Poisson at 100/s for 0.5 s
    assert len({a.request_id for a in answers}) == len(answers)
    assert all(a.echoed_id == a.request_id for a in answers)
    outcomes = {a.outcome for a in answers}
    assert outcomes == {"ok", "unavailable"}


def _answer(i: int, sent_s: float, status: int, latency_ms: float, outcome: str,
            error: str | None = None) -> dict[str, Any]:
    rid = f"r{i}"
    return Answer(rid, sent_s, status, latency_ms, outcome, rid if status else None,
                  error).to_dict()


LOST = "model 'vit' lost its last live replica while this request waited for an answer"


def _run() -> dict[str, Any]:
    """Steady 200s from t=0..10, the node stopped at 10; a 429 at 10.05 (not the gap), one
    slow 200 sent at 10.1; a request waiting when the family went (503 at 10.7); fast 503
    refusals 10.5..14, 200s again from 14; /healthz down 11..15."""
    answers = [_answer(i, float(i), 200, 50.0, "ok") for i in range(10)]
    answers.append({**_answer(10, 10.05, 429, 30.0, "overloaded"), "echoed_id": None})
    answers.append(_answer(11, 10.1, 200, 300.0, "ok"))
    answers.append(_answer(12, 10.3, 503, 400.0, "unavailable", LOST))
    answers += [_answer(13 + i, 10.5 + 0.5 * i, 503, 5.0 + i, "unavailable", "no live replica")
                for i in range(7)]
    answers += [_answer(20 + i, 14.0 + i, 200, 60.0, "ok") for i in range(5)]
    probes = [{"route": "/healthz", "sent_s": t, "status": 503 if 11 <= t < 15 else 200,
               "latency_ms": 2.0, "healthy": not 11 <= t < 15, "state": "x"}
              for t in range(0, 19)]
    return {"stop_s": 10.0, "node_gone_s": 10.8, "placed_s": 13.0, "recovered_s": 15.5,
            "steady_start_s": 0.0, "load_end_s": 19.0, "slo_ms": 200.0, "answers": answers,
            "probes": probes, "client_loop_lags": [(12.0, 30.0)]}


def test_figures_of_a_node_stop() -> None:
    fig = figures(_run())
    assert fig["sent"] == fig["answered"] == 25 and fig["exactly_once"]
    assert fig["status_codes"] == {200: 16, 429: 1, 503: 8} and fig["other_5xx"] == 0
    assert fig["n_refused"] == 7 and fig["max_refused_ms"] == 11.0 and fig["fast_503"]
    assert fig["n_lost"] == 1 and fig["max_lost_ms"] == 400.0  # not a slow refusal
    assert fig["gap"]["first_bad_s"] == approx(0.505)  # sent 10.5, answered 5 ms later
    assert fig["gap"]["first_good_after_s"] == approx(4.06)  # sent 14.0, answered 60 ms later
    assert fig["gap"]["last_bad_sent_s"] == approx(3.5)
    assert fig["healthz"]["first_bad_s"] == approx(1.002)
    assert fig["healthz"]["first_good_after_s"] == approx(5.002)
    assert fig["before"]["attainment"] == 1.0 and fig["before"]["sent"] == 10
    assert fig["after"]["sent"] == 4 and fig["passed"]  # sent from 14.06 on
    assert fig["client_lag_max_ms"] == 30.0
    assert fig["id_mismatches"] == 0 and fig["no_id_echoed"] == {429: 1}
    assert "| every request answered once |" in table(rows(fig, 200.0))


def test_a_lost_request_or_a_500_fails() -> None:
    run = _run()
    run["answers"][14] = Answer("r14", 11.0, outcome="transport", error="reset").to_dict()
    run["answers"][15] = _answer(15, 11.5, 500, 4.0, "proxy_error")
    fig = figures(run)
    assert not fig["exactly_once"] and fig["transport_errors"] == 1
    assert fig["other_5xx"] == 1 and not fig["passed"]


def test_slow_503s_fail() -> None:
    run = _run()
    run["answers"][13] = _answer(13, 10.5, 503, 2200.0, "unavailable", "no live replica")
    fig = figures(run)
    assert fig["slow_refused"] == 1 and not fig["fast_503"] and not fig["passed"]
    assert json.dumps(fig)  # JSON as the script writes it


def test_proxy_latencies_reads_the_access_log(tmp_path: Path) -> None:
    from bench.experiments.node_loss.run import proxy_latencies

    (tmp_path / "proxy_127.0.0.1.log").write_text(
        "INFO 2026-11-24 16:07:40,436 proxy 127.0.0.1 nodeloss-000007 -- POST /v1/classify "
        "503 4.2ms\nINFO 2026-11-24 16:07:40,502 proxy 127.0.0.1 0add5240-1561 -- POST "
        "/v1/classify 200 14.7ms\n")
    assert proxy_latencies(tmp_path) == {"nodeloss-000007": 4.2}


def test_the_gap_starts_when_a_failure_is_seen() -> None:
    """A crash: requests sent from the stop on all wait until the loss is seen (2.4 s), those
    sent after that get fast 503s until a 200 at 18 s; a 200 to a request sent before the
    failure was seen does not end the gap."""
    answers = [_answer(i, 9.0 + 0.1 * i, 200, 20.0, "ok") for i in range(10)]
    answers += [_answer(10 + i, 10.0 + 0.2 * i, 503, 2400.0 - 200.0 * i, "unavailable", LOST)
                for i in range(10)]
    answers.append(_answer(30, 12.3, 200, 200.0, "ok"))  # sent before 12.4, answered after
    answers += [_answer(40 + i, 12.5 + i, 503, 8.0, "unavailable", "no live replica")
                for i in range(6)]
    answers += [_answer(50 + i, 18.0 + i, 200, 20.0, "ok") for i in range(3)]
    run = {**_run(), "answers": answers}
    fig = figures(run)
    assert fig["gap"]["first_bad_s"] == approx(2.4)
    assert fig["gap"]["first_good_after_s"] == approx(8.02)
    assert fig["n_lost"] == 10 and fig["max_lost_ms"] == 2400.0 and fig["fast_503"]
    wrong = {**answers[-1], "echoed_id": "r0"}
    assert not figures({**run, "answers": [*answers[:-1], wrong]})["exactly_once"]
