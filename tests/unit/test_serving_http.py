"""The ingress's HTTP layer without Ray: server faults become JSON 5xx answers, never a crash;
admission refuses with 429 + Retry-After, the clock starts at X-Request-Start, jobs are bounded."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from deployments.ingress.classify.catalog import Catalog
from deployments.ingress.config import HttpConfig
from deployments.wire import ClassifyCall, ClassifyOutcome, ItemResult, ItemStatus
from tests.helpers.classify_http import BODY, client, client_of, service_of


def error_call(call: ClassifyCall) -> ClassifyOutcome:
    return ClassifyOutcome(results=(ItemResult(call.item_ids[0], ItemStatus.ERROR,
                                               error="batch failed: boom",
                                               error_type="internal_error"),))


def test_item_error_is_500_json() -> None:
    r = client(error_call).post("/v1/classify", json=BODY)
    assert r.status_code == 500 and r.json()["error"]["type"] == "internal_error"
    assert "boom" in r.json()["error"]["message"]


def test_dead_replica_is_503_json() -> None:
    r = client(lambda call: RuntimeError("actor died")).post("/v1/classify", json=BODY)
    assert r.status_code == 503 and r.json()["error"]["type"] == "replica_unavailable"


def test_unexpected_exception_is_500_json() -> None:
    def broken(call: ClassifyCall) -> Any:
        return "not an outcome"  # the service then fails on attribute access
    r = client(broken).post("/v1/classify", json=BODY)
    assert r.status_code == 500 and r.json()["error"]["type"] == "internal_error"
    assert client(broken).get("/metrics").status_code == 200


def test_status_without_controller_is_503_and_healthz_ready() -> None:
    c = client(error_call)
    r = c.get("/v1/status")
    assert r.status_code == 503 and r.json()["error"]["type"] == "controller_unavailable"
    assert c.get("/healthz").json() == {"status": "ok", "models": ["m"]}


def test_response_margin_comes_out_of_the_replicas_deadline() -> None:
    seen: list[ClassifyCall] = []

    def answer(call: ClassifyCall) -> ClassifyOutcome:
        seen.append(call)
        return ClassifyOutcome(results=(ItemResult(call.item_ids[0], ItemStatus.SHED),))

    c = client(answer, HttpConfig(response_margin_ms=20.0))
    c.post("/v1/classify", json=BODY)  # SLO 100 ms: the replicas get 80
    c.post("/v1/classify", json={**BODY, "slo": {"latency_ms": 30}})  # at most half: 15
    budgets = [1000 * (call.deadline_s - call.arrival_s) for call in seen]
    assert budgets == pytest.approx([80.0, 15.0], abs=0.01)


def ok_call(seen: list[ClassifyCall]) -> Any:
    def answer(call: ClassifyCall) -> ClassifyOutcome:
        seen.append(call)
        return ClassifyOutcome(results=tuple(ItemResult(i, ItemStatus.OK, label=1, confidence=0.9)
                                             for i in call.item_ids))
    return answer


def overloaded(r: Any) -> dict[str, Any]:
    assert r.status_code == 429, r.text
    retry = r.headers["retry-after"]
    assert retry.isdigit() and int(retry) >= 1
    err = r.json()["error"]
    assert err["type"] == "overloaded" and "m is overloaded" in err["message"]
    return dict(err, retry_after=int(retry))


def test_request_start_header_starts_the_clock() -> None:
    seen: list[ClassifyCall] = []
    svc = service_of(ok_call(seen))
    c = client_of(svc)
    sent_s = time.time() - 0.05
    r = c.post("/v1/classify", json={**BODY, "slo": {"latency_ms": 3000}},
               headers={"X-Request-Start": f"t={sent_s:.6f}"})
    assert r.status_code == 200, r.text
    assert r.json()["latency_ms"] >= 50.0
    assert seen[0].arrival_s == pytest.approx(sent_s, abs=1e-5)
    assert seen[0].deadline_s == pytest.approx(sent_s + 3.0, abs=1e-5)
    text = c.get("/metrics").text
    assert "adaptserve_pre_ingress_seconds_count 1.0" in text
    assert 'adaptserve_pre_ingress_seconds_bucket{le="0.025"} 0.0' in text


def test_unbelievable_request_start_is_ignored_and_counted() -> None:
    seen: list[ClassifyCall] = []
    c = client_of(service_of(ok_call(seen)))
    before = time.time()
    for value in (f"t={time.time() + 3600:.3f}", "t=yesterday", f"{(time.time() - 7200) * 1e3:.0f}"):
        assert c.post("/v1/classify", json=BODY, headers={"X-Request-Start": value}).status_code == 200
    assert all(call.arrival_s >= before for call in seen)
    text = c.get("/metrics").text
    for reason in ("future", "malformed", "stale"):
        assert f'adaptserve_request_start_ignored_total{{reason="{reason}"}} 1.0' in text
    assert "adaptserve_pre_ingress_seconds_count 0.0" in text


def test_request_already_late_is_refused_before_preprocess() -> None:
    seen: list[ClassifyCall] = []
    c = client_of(service_of(ok_call(seen)))
    r = c.post("/v1/classify", json=BODY,  # SLO 100 ms, sent 150 ms ago
               headers={"X-Request-Start": f"{(time.time() - 0.15) * 1e6:.0f}"})
    overloaded(r)
    assert seen == []
    assert 'adaptserve_admission_refused_total{family="m",reason="overloaded"} 1.0' in \
        c.get("/metrics").text


def test_expected_wait_refuses_with_retry_after_of_the_wait() -> None:
    seen: list[ClassifyCall] = []
    svc = service_of(ok_call(seen))
    c = client_of(svc)
    svc.admission.begin("m", 90)  # 90 items x 1 ms: 90 ms + 1 ms fastest fits an SLO of 100
    assert c.post("/v1/classify", json=BODY).status_code == 200
    svc.admission.begin("m", 2910)  # 3 s of work ahead
    err = overloaded(c.post("/v1/classify", json=BODY))
    assert err["retry_after"] == 3 and "3000 items in flight" in err["message"]
    assert len(seen) == 1 and svc.admission.inflight("m") == 3000  # the answered one left
    off = service_of(ok_call(seen), HttpConfig(deadline_admission=False))
    off.admission.begin("m", 3000)
    assert client_of(off).post("/v1/classify", json=BODY).status_code == 200


def test_job_over_the_item_cap_is_413_naming_the_limit() -> None:
    seen: list[ClassifyCall] = []
    c = client(ok_call(seen), HttpConfig(max_items_per_job=3))
    job = {"model": "m", "items": [{"image": "x"}] * 4, "slo": {"latency_ms": 1000}}
    r = c.post("/v1/jobs", json=job)
    assert r.status_code == 413, r.text
    err = r.json()["error"]
    assert err["type"] == "job_too_large" and "at most 3 items" in err["message"]
    assert err["field"] == "items" and seen == []
    assert c.post("/v1/jobs", json={**job, "items": job["items"][:3]}).status_code == 200


def test_job_takes_at_most_its_share_of_the_queue_the_rest_shed_at_once() -> None:
    seen: list[ClassifyCall] = []
    svc = service_of(ok_call(seen), HttpConfig(max_job_queue_share=0.5), queue=8)
    c = client_of(svc)
    job = {"model": "m", "items": [{"image": "x"}] * 6, "slo": {"latency_ms": 1000}}
    results = c.post("/v1/jobs", json=job).json()["results"]
    assert [x["status"] for x in results] == ["ok"] * 4 + ["shed"] * 2
    assert "room for 4 of this job's 6 items" in results[-1]["error"]
    assert len(seen[0].inputs) == 4
    svc.admission.begin("m", 8)  # the family's queue is taken: nothing of a new job fits
    overloaded(c.post("/v1/jobs", json=job))
    assert len(seen) == 1


def test_a_classify_answer_tells_the_front_door_whether_the_policy_degrades() -> None:
    """The catalog's family runs `fixed` (it cannot degrade): its answers say "0"; the front
    door (proxy/front_door.py) reads the header and takes it off."""
    r = client(ok_call([])).post("/v1/classify", json=BODY)
    assert r.status_code == 200 and r.headers["x-adaptserve-degrades"] == "0"
    assert r.json()["status"] == "ok" and r.json()["prediction"]["label"] == 1
    # the same family as one whose policy degrades (family_info decides it: test_ingress_admission)
    service = service_of(ok_call([]))
    service.catalog = Catalog(tuple(replace(f, degrades=True) for f in service.catalog.families))
    r = client_of(service).post("/v1/classify", json=BODY)
    assert r.status_code == 200 and r.headers["x-adaptserve-degrades"] == "1"
