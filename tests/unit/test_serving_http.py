"""The ingress's HTTP layer without Ray: server faults become JSON 5xx answers, never a crash."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from deployments.ingress.catalog import Catalog, family_info
from deployments.ingress.config import HttpConfig
from deployments.ingress.deployment import IngressMetrics, build_http_app
from deployments.ingress.service import IngressService
from deployments.wire import ClassifyCall, ClassifyOutcome, ItemResult, ItemStatus
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant


class _Response:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __await__(self):  # type: ignore[no-untyped-def]
        async def get() -> Any:
            if isinstance(self.value, Exception):
                raise self.value
            return self.value
        return get().__await__()

    def cancel(self) -> None:
        pass


class _Method:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> _Response:
        return _Response(self.fn(*args))


class FakePreprocess:
    """Stands in for the preprocess DeploymentHandle (`.classify.remote(call)`)."""

    def __init__(self, answer: Any) -> None:
        self.classify = _Method(answer)
        self.ping = _Method(lambda: {"ready": ["m"], "waiting": []})


def client(answer: Any, http: HttpConfig | None = None) -> TestClient:
    point = LatencyPoint(1, 1.0, 1.0, 1.0, 1.0)
    profile = Profile("m.t", "cpu", (VariantProfile(Variant("v", "v"), 0.8, (point,)),))
    catalog = Catalog((family_info("m", ("image",), {"t": profile}, "fixed", "p95", 4),))
    service = IngressService(catalog, http or HttpConfig(), FakePreprocess(answer))
    controller = type("C", (), {"status": _Method(lambda: RuntimeError("down")),
                                "metrics_text": _Method(lambda: "")})()
    return TestClient(build_http_app(service, controller, IngressMetrics()))


BODY = {"model": "m", "inputs": {"image": "x"}, "slo": {"latency_ms": 100}}


def error_call(call: ClassifyCall) -> ClassifyOutcome:
    return ClassifyOutcome(results=(ItemResult(call.item_ids[0], ItemStatus.ERROR,
                                               error="batch failed: boom",
                                               error_type="internal_error"),))


def test_item_error_is_500_json() -> None:
    r = client(error_call).post("/v1/classify", json=BODY)
    assert r.status_code == 500 and r.json()["error"]["type"] == "internal_error"
    assert "boom" in r.json()["error"]["message"]


def test_dead_preprocess_is_503_json() -> None:
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
