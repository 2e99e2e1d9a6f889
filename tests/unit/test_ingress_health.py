"""Health in the ingress without Ray (deployments/ingress/health.py): the prober reads Serve's
broadcast (faked: a DeploymentHandle is a boundary we do not own), the request path's failures
wake it, a down family's requests get 503 `unavailable` with Retry-After before any call, and
/healthz and /v1/status say which family is down."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from deployments.ingress.classify.service import IngressService
from deployments.ingress.clock import Arrival, StartSource
from deployments.ingress.deployment import build_http_app, health_of
from deployments.ingress.errors import ApiError
from deployments.ingress.health import FamilyLiveness, WatchedHandle, probe
from deployments.wire import ClassifyCall, ClassifyOutcome, ItemResult, ItemStatus
from policies.liveness import Health, LivenessSettings, ProbeResult, after_probe
from tests.helpers.classify_http import BODY, FakeMethod, service_of

FAST = LivenessSettings(probe_period_s=0.05, down_probe_period_s=0.01, probe_timeout_s=0.05,
                        suspect_max_s=0.2, retry_after_s=2)


class FakeBroadcast:
    """`handle.broadcast("ping").results_async(...)` as Serve answers it: one answer (or
    exception) per running replica; DeploymentUnavailableError-like when there is none."""

    def __init__(self) -> None:
        self.replicas: list[Any] = ["r1"]
        self.delay_s = 0.0
        self.calls = 0

    def broadcast(self, method: str) -> FakeBroadcast:
        assert method == "ping"
        self.calls += 1
        return self

    async def results_async(self, timeout_s: float, return_exceptions: bool) -> list[Any]:
        assert return_exceptions

        async def answer() -> list[Any]:
            await asyncio.sleep(self.delay_s)
            if not self.replicas:
                raise RuntimeError("DeploymentUnavailableError: no replicas")
            return list(self.replicas)
        return await asyncio.wait_for(answer(), timeout_s)


def test_probe_counts_live_and_dead_replicas() -> None:
    fake = FakeBroadcast()
    fake.replicas = ["r1", RuntimeError("ActorDiedError: gone")]
    r = asyncio.run(probe(fake, 1.0))
    assert r == ProbeResult(1, 1, False, "RuntimeError: ActorDiedError: gone")
    fake.replicas = []
    r = asyncio.run(probe(fake, 1.0))
    assert r.answered == 0 and not r.timed_out and "no running replica" in r.error
    fake.replicas, fake.delay_s = ["r1"], 0.2
    assert asyncio.run(probe(fake, 0.01)).timed_out


GUARD_S = 30.0  # only a hang guard: the checks below are about which probe did it, not speed


async def _until(live: FamilyLiveness, state: Health) -> None:
    t0 = time.monotonic()
    while live.states["m"].state is not state:
        assert time.monotonic() - t0 < GUARD_S, (state, live.states["m"])
        await asyncio.sleep(0.001)


async def _watched_kill_and_return() -> list[tuple[Health, int]]:
    """Each state change of the family, with how many probes had gone out by then. The
    periodic probe is an hour away: only the failed call waking the watcher can probe."""
    fake = FakeBroadcast()
    seen: list[tuple[Health, int]] = []
    settings = LivenessSettings(probe_period_s=3600.0, down_probe_period_s=0.01,
                                probe_timeout_s=GUARD_S, suspect_max_s=3600.0, retry_after_s=2)
    live = FamilyLiveness(["m"], settings, observe=lambda f, h: seen.append((h.state,
                                                                            fake.calls)))
    tasks = live.start({"m": fake})
    await _until(live, Health.UP)
    fake.replicas = []  # the only replica died; a request call to it fails
    live.call_failed("m", RuntimeError("ActorDiedError"))
    assert live.states["m"].state is Health.SUSPECT and live.refusal("m") is None
    await _until(live, Health.DOWN)  # woken at once, not after probe_period_s
    refusal = live.refusal("m")
    assert refusal is not None and refusal.status == 503 and refusal.type == "unavailable"
    assert refusal.retry_after_s == 2 and "'m'" in refusal.message
    fake.replicas = ["r2"]
    await _until(live, Health.UP)  # down: probed every down_probe_period_s
    for t in tasks:
        t.cancel()
    return seen


def test_watcher_marks_down_at_once_and_up_when_a_replica_is_back() -> None:
    seen = asyncio.run(_watched_kill_and_return())
    states = [state for state, _ in seen]
    assert states == [Health.STARTING, Health.UP, Health.SUSPECT, Health.DOWN, Health.UP]
    calls = dict(zip(states[:4], [n for _, n in seen[:4]], strict=True))
    # the first probe brought it up; the failed call made it suspect without a probe; the
    # very next probe (the one the failure asked for) found no replica
    assert (calls[Health.UP], calls[Health.SUSPECT], calls[Health.DOWN]) == (1, 1, 2)


class _Hanging:
    """A route call that never answers (Serve's router waiting for a replica)."""

    def __await__(self):  # type: ignore[no-untyped-def]
        return asyncio.get_event_loop().create_future().__await__()

    def cancel(self) -> None:
        pass


async def _killed_with_nothing_in_flight() -> tuple[float, int]:
    fake = FakeBroadcast()
    settings = LivenessSettings(probe_period_s=3600.0, down_probe_period_s=0.01,
                                probe_timeout_s=GUARD_S, slow_call_s=0.02)
    live = FamilyLiveness(["m"], settings)
    tasks = live.start({"m": fake})
    while live.states["m"].state is not Health.UP:
        await asyncio.sleep(0.001)
    fake.replicas = []
    route = WatchedHandle(type("H", (), {"classify_many": type("M", (), {
        "remote": staticmethod(lambda calls: _Hanging())})()})(), "m", live)
    probes = fake.calls
    t0 = time.monotonic()
    call = asyncio.ensure_future(_await(route.classify_many.remote([])))
    await _until(live, Health.DOWN)
    took_s = time.monotonic() - t0
    call.cancel()
    for t in tasks:
        t.cancel()
    return took_s, fake.calls - probes


async def _waiting_when_the_family_goes_down() -> tuple[Any, int]:
    service = service_of(lambda call: None)
    live = FamilyLiveness(["m"], FAST)
    # the family was up (a family still starting waits out its grace: Serve is building it)
    live._set("m", after_probe(live.states["m"], ProbeResult(1), time.time(), FAST))
    service.liveness = live
    hanging = type("H", (), {"classify_many": type("M", (), {
        "remote": staticmethod(lambda calls: _Hanging())})()})()
    service.routes["m"].handle = WatchedHandle(hanging, "m", live)
    now = time.time()
    request = asyncio.ensure_future(service.classify(
        json.dumps({**BODY, "slo": {"latency_ms": 10_000}}).encode(),
        Arrival(now, now, StartSource.ENTRY)))
    await asyncio.sleep(0.05)
    assert not request.done() and service.admission.inflight("m") == 1
    _down(live, "m")
    turns = 0  # event-loop turns until the request is answered: no timer is involved
    while not request.done() and turns < 100:
        turns += 1
        await asyncio.sleep(0)
    assert request.done(), "the waiting request still waits"
    try:
        await request
    except ApiError as exc:
        return exc, turns
    raise AssertionError("the waiting request was not refused")


def test_requests_waiting_when_the_family_goes_down_get_503_at_once() -> None:
    """Requests already sent wait in Serve's router for a replica that is gone: the family
    going down answers them now (once each), not at their deadline 10 s later."""
    exc, turns = asyncio.run(_waiting_when_the_family_goes_down())
    assert exc.status == 503 and exc.type == "unavailable" and exc.retry_after_s == 2
    assert "while this request waited" in exc.message and turns < 100


def test_a_hanging_call_gets_the_family_probed_without_waiting_for_the_period() -> None:
    took_s, probes = asyncio.run(_killed_with_nothing_in_flight())
    # after slow_call_s (the loop's timer never fires early), one probe, brought forward
    # from a period of an hour, found no replica
    assert took_s >= 0.02 and probes == 1


def test_watched_handle_reports_failures_and_answers() -> None:
    live = FamilyLiveness(["m"], FAST)
    ok = WatchedHandle(type("H", (), {"classify_many": FakeMethod(lambda calls: ["x"])})(),
                       "m", live)
    assert asyncio.run(_await(ok.classify_many.remote([]))) == ["x"]
    assert live.states["m"].state is Health.UP
    bad = WatchedHandle(type("H", (), {"classify_many": FakeMethod(
        lambda calls: RuntimeError("ActorDiedError"))})(), "m", live)
    with pytest.raises(RuntimeError, match="ActorDiedError"):
        asyncio.run(_await(bad.classify_many.remote([])))
    assert live.states["m"].state is Health.SUSPECT and "ActorDiedError" in live.states["m"].reason


async def _await(response: Any) -> Any:
    return await response


def _down(live: FamilyLiveness, family: str) -> None:
    """A probe found no running replica (through the state machine's setter, as `watch`)."""
    live._set(family, after_probe(live.states[family], ProbeResult(0, error="no running "
                                  "replica"), time.time(), live.settings))


def _client(service: IngressService, status: dict[str, Any] | None = None) -> TestClient:
    controller = type("C", (), {"status": FakeMethod(lambda: status or RuntimeError("down")),
                                "metrics_text": FakeMethod(lambda: "")})()
    probes = {"Classifier_m": None}
    return TestClient(build_http_app(service, controller, service.metrics,
                                     lambda: health_of(service, set(probes), probes)))


def _service(families: list[str]) -> tuple[IngressService, list[ClassifyCall]]:
    sent: list[ClassifyCall] = []

    def answer(call: ClassifyCall) -> ClassifyOutcome:
        sent.append(call)
        return ClassifyOutcome(results=(ItemResult(call.item_ids[0], ItemStatus.OK),))
    service = service_of(answer)
    service.liveness = FamilyLiveness(families, FAST, observe=service.metrics.observe_health)
    for f in families:
        service.liveness.states[f] = after_probe(service.liveness.states[f], ProbeResult(1),
                                                 time.time(), FAST)
    return service, sent


def test_down_family_gets_fast_503_with_retry_after_and_health_says_so() -> None:
    service, sent = _service(["m", "other"])
    status = {"deployments": {"m": {"replicas": []}, "other": {"replicas": [{"replica": "a"}]}}}
    c = _client(service, status)
    assert c.post("/v1/classify", json=BODY).status_code == 200 and len(sent) == 1
    assert c.get("/healthz").json()["status"] == "ok"
    _down(service.liveness, "m")  # type: ignore[arg-type]
    r = c.post("/v1/classify", json=BODY)
    assert r.status_code == 503 and r.headers["retry-after"] == "2", r.text
    assert r.json()["error"]["type"] == "unavailable" and r.json()["error"]["field"] == "model"
    jobs = c.post("/v1/jobs", json={"model": "m", "items": [BODY["inputs"]],
                                    "slo": BODY["slo"]})
    assert jobs.status_code == 503 and jobs.json()["error"]["type"] == "unavailable"
    assert len(sent) == 1  # nothing reached the route
    h = c.get("/healthz")
    assert h.status_code == 200 and h.json()["status"] == "degraded" and h.json()["down"] == ["m"]
    fam = h.json()["families"]["m"]
    assert fam["state"] == "down" and not fam["healthy"] and fam["live_replicas"] == 0
    s = c.get("/v1/status").json()["deployments"]
    assert s["m"]["healthy"] is False and s["m"]["live_replicas"] == 0
    assert s["m"]["health"]["state"] == "down" and s["other"]["healthy"] is True
    metrics = c.get("/metrics").text
    assert 'adaptserve_family_up{family="m"} 0.0' in metrics
    assert 'adaptserve_admission_refused_total{family="m",reason="unavailable"} 2.0' in metrics


def test_healthz_is_503_when_no_family_has_a_live_replica() -> None:
    service, _ = _service(["m"])
    _down(service.liveness, "m")  # type: ignore[arg-type]
    r = _client(service).get("/healthz")
    assert r.status_code == 503 and r.json()["error"]["type"] == "unavailable"
    assert r.headers["retry-after"] == "2" and "['m']" in r.json()["error"]["message"]


def test_a_failed_route_call_only_makes_the_family_suspect() -> None:
    """One failed call (a replica died with the request on it) is answered as before; the
    family is probed, not refused, until a probe finds no replica."""
    service = service_of(lambda call: RuntimeError("actor died"))
    live = FamilyLiveness(["m"], FAST)
    service.liveness = live
    service.routes["m"].handle = WatchedHandle(service.routes["m"].handle, "m", live)
    r = _client(service).post("/v1/classify", json=BODY)
    assert r.status_code == 503 and r.json()["error"]["type"] == "replica_unavailable"
    assert live.states["m"].state is Health.SUSPECT and live.refusal("m") is None


def test_a_call_that_failed_slowly_does_not_price_later_requests() -> None:
    """During a node loss a call waits for a replica and fails (~220 ms): it measured no
    drain. Had it been recorded, every later request of a 100 ms SLO would get 429 from this
    ingress, for good (refused requests bring no answers to correct the estimate)."""
    dead = [True]

    def answer(call: ClassifyCall) -> Any:
        if dead[0]:
            time.sleep(0.05)
            return RuntimeError("actor died")
        return ClassifyOutcome(results=(ItemResult(call.item_ids[0], ItemStatus.OK),))
    service = service_of(answer)
    c = _client(service)
    assert c.post("/v1/classify", json=BODY).status_code == 503  # after the retries
    dead[0] = False
    service.admission.begin("m", 1)  # one in flight: the measured estimate would apply
    assert service.admission.expected_wait_s("m", "t") < 0.01
    service.admission.end("m", 1)
    assert c.post("/v1/classify", json=BODY).status_code == 200
