"""The front door on a real Serve app: the clock starts at X-Request-Start, a request that can no
longer make its deadline is refused at once (429, Retry-After, JSON), the time before the
ingress is exported."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from bench.core import http
from tests.integration.conftest import Server

pytestmark = pytest.mark.integration


def body(examples, slo_ms: float) -> dict[str, Any]:
    task = next(iter(examples["family"]))
    return {"model": "family", "task": task, "inputs": dict(examples["family"][task][0].inputs),
            "slo": {"latency_ms": slo_ms}}


def post_sent_at(server: Server, b: dict[str, Any], sent_s: float) -> http.HttpResponse:
    return http.request("POST", server.url + "/v1/classify", json.dumps(b).encode(),
                        {"content-type": http.JSON_TYPE, "X-Request-Start": f"t={sent_s:.6f}"})


def test_request_start_counts_in_the_answer(server: Server, examples) -> None:
    r = post_sent_at(server, body(examples, 5000.0), time.time() - 0.3)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["status"] == "ok" and out["latency_ms"] >= 300.0
    assert out["decision"]["queue_ms"] >= 300.0  # the replica counts from the same arrival
    text = server.get("/metrics").text
    assert "adaptserve_pre_ingress_seconds_count" in text


def test_request_already_past_its_deadline_is_refused_at_once(server: Server, examples) -> None:
    r = post_sent_at(server, body(examples, 100.0), time.time() - 0.5)
    assert r.status_code == 429, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert int(r.headers["retry-after"]) >= 1
    err = r.json()["error"]
    assert err["type"] == "overloaded" and "family" in err["message"]
    text = server.get("/metrics").text
    assert 'adaptserve_admission_refused_total{family="family",reason="overloaded"}' in text


def test_unbelievable_request_start_is_ignored(server: Server, examples) -> None:
    r = post_sent_at(server, body(examples, 5000.0), time.time() + 3600)
    # counted from its arrival, not from an hour ahead (which would make it negative)
    assert r.status_code == 200 and r.json()["latency_ms"] >= 0, r.text
    assert 'adaptserve_request_start_ignored_total{reason="future"}' in server.get("/metrics").text
