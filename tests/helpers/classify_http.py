"""The classify ingress without Ray: a one-family catalog, the service over faked family
handles, and TestClients of the real HTTP app (with or without API keys)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from deployments.ingress.classify.admission import Admission, FamilyCapacity
from deployments.ingress.classify.catalog import Catalog, family_info
from deployments.ingress.classify.service import IngressService
from deployments.ingress.config import HttpConfig
from deployments.ingress.deployment import build_http_app, health_of
from deployments.ingress.metrics import IngressMetrics
from deployments.ingress.proxy.auth import AuthConfig, load_keys
from deployments.wire import ClassifyCall, ClassifyOutcome, ItemResult, ItemStatus
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant

BODY = {"model": "m", "inputs": {"image": "x"}, "slo": {"latency_ms": 100}}


class FakeResponse:
    """What `handle.method.remote(...)` returns: awaitable; an exception value is raised."""

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


class FakeMethod:
    """A handle's method: `.remote(*args)` answers `fn(*args)` (an exception value fails)."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> FakeResponse:
        return FakeResponse(self.fn(*args))


class FakeRoute:
    """Stands in for a family's DeploymentHandle (`.classify_many.remote(calls)`): `answer`
    answers each call; an exception for any call fails the whole handle call (a dead replica)."""

    def __init__(self, answer: Any) -> None:
        def many(calls: list[ClassifyCall]) -> Any:
            out = [answer(c) for c in calls]
            failures = [o for o in out if isinstance(o, Exception)]
            return failures[0] if failures else out
        self.classify_many = FakeMethod(many)


def catalog() -> Catalog:
    point = LatencyPoint(1, 1.0, 1.0, 1.0, 1.0)  # ms: 1 ms at batch 1
    profile = Profile("m.t", "cpu", (VariantProfile(Variant("v", "v"), 0.8, (point,)),))
    return Catalog((family_info("m", ("image",), {"t": profile}, "fixed", "p95", 4),))


def service_of(answer: Any, http: HttpConfig | None = None,
               queue: int = 256) -> IngressService:
    http = http or HttpConfig()
    admission = Admission(catalog(), {"m": FamilyCapacity(1, queue)}, 1,
                          http.max_job_queue_share)
    return IngressService(catalog(), http, {"m": FakeRoute(answer)}, admission, IngressMetrics())


def client_of(service: IngressService) -> TestClient:
    controller = type("C", (), {"status": FakeMethod(lambda: RuntimeError("down")),
                                "metrics_text": FakeMethod(lambda: "")})()
    probes = {"Classifier_m": None}  # every deployment behind the ingress has answered
    return TestClient(build_http_app(service, controller, service.metrics,
                                     lambda: health_of(service, set(probes), probes)))


def client(answer: Any, http: HttpConfig | None = None) -> TestClient:
    return client_of(service_of(answer, http))


def shed(call: ClassifyCall) -> ClassifyOutcome:
    """An answer shedding the call's first item."""
    return ClassifyOutcome(results=(ItemResult(call.item_ids[0], ItemStatus.SHED),))


def keyed_client() -> TestClient:
    """The app with one API key (sk-ingress-0001), reached without the proxy's front door."""
    service = service_of(shed)
    controller = type("C", (), {})()
    probes: dict[str, Any] = {}
    keys = load_keys(AuthConfig(), {"ADAPTSERVE_API_KEYS": "sk-ingress-0001"})
    return TestClient(build_http_app(service, controller, service.metrics,
                                     lambda: health_of(service, set(), probes), keys))
