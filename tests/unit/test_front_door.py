"""Admission at the front door: the AIMD concurrency limit (policies/admission.py) and the
proxy middleware that applies it (deployments/ingress/proxy/front_door.py)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from deployments.ingress.proxy.front_door import FrontDoor, peek
from policies.admission import ConcurrencyLimiter, LimiterSettings


def test_limit_refuses_beyond_it_and_frees_on_release() -> None:
    lim = ConcurrencyLimiter(LimiterSettings(initial_limit=2, window=100))
    assert lim.try_acquire() and lim.try_acquire()
    assert not lim.try_acquire() and lim.refused == 1
    lim.release(0.01, 0.2)
    assert lim.try_acquire()


def test_one_late_answer_in_a_window_does_not_shrink_the_limit() -> None:
    lim = ConcurrencyLimiter(LimiterSettings(initial_limit=10, window=50))
    for i in range(50):
        lim.try_acquire()
        lim.release(0.19 if i == 7 else 0.05, 0.2)
    assert lim.limit == 10.0
    lim = ConcurrencyLimiter(LimiterSettings(initial_limit=10, window=50))
    for i in range(50):
        lim.try_acquire()
        lim.release(0.19 if i % 10 == 0 else 0.05, 0.2)  # 10 % late
    assert lim.limit == 9.0


def test_late_window_shrinks_limit_and_clean_saturated_window_grows_it() -> None:
    s = LimiterSettings(initial_limit=10, window=4, decrease=0.5, base_samples=0)
    lim = ConcurrencyLimiter(s)
    for _ in range(4):
        lim.try_acquire()
        lim.release(0.19, 0.2)  # later than 0.6 x SLO
    assert lim.limit == 5.0
    for _ in range(6):
        lim.try_acquire()
    assert not lim.try_acquire()  # saturated at 5
    for _ in range(4):
        lim.release(0.05, 0.2)
    assert lim.limit == 6.0
    for _ in range(4):  # not saturated, nothing late: unchanged
        lim.try_acquire()
        lim.release(0.05, 0.2)
    assert lim.limit == 6.0


def test_failures_count_as_late_and_limit_stays_within_bounds() -> None:
    lim = ConcurrencyLimiter(LimiterSettings(initial_limit=2, min_limit=1, window=1))
    for _ in range(10):
        lim.try_acquire()
        lim.release(0.001, None, failed=True)
    assert lim.limit == 1.0
    with pytest.raises(ValueError):
        LimiterSettings(initial_limit=0)


def test_late_is_measured_on_the_slack_above_the_unloaded_latency() -> None:
    # a model that takes 90 ms unloaded under a 200 ms SLO: one request waiting behind another
    # (130 ms) is not late; within 0.6 of the 110 ms slack (156 ms) it still is not; past it is
    lim = ConcurrencyLimiter(LimiterSettings(initial_limit=4, window=10, decrease=0.5))
    for _ in range(10):
        lim.try_acquire()
        lim.release(0.09, 0.2, unloaded=True)
    assert lim.base_s == pytest.approx(0.09) and lim.late_after_s(0.2) == pytest.approx(0.156)
    for _ in range(10):
        lim.try_acquire()
        lim.release(0.13, 0.2)
    assert lim.limit == 4.0
    for _ in range(10):
        lim.try_acquire()
        lim.release(0.17, 0.2)
    assert lim.limit == 2.0
    # measured against the SLO alone (no base), the same 130 ms answers were late
    old = ConcurrencyLimiter(LimiterSettings(initial_limit=4, window=10, decrease=0.5,
                                             base_samples=0))
    for _ in range(10):
        old.try_acquire()
        old.release(0.13, 0.2)
    assert old.base_s == 0.0 and old.limit == 2.0


def test_only_unloaded_answers_set_the_unloaded_latency() -> None:
    lim = ConcurrencyLimiter(LimiterSettings(initial_limit=4, window=100, base_samples=3))
    assert lim.base_s == 0.0 and lim.late_after_s(0.2) == pytest.approx(0.12)
    lim.try_acquire()
    lim.release(0.09, 0.2, unloaded=True)
    lim.try_acquire()
    lim.release(0.05, 0.2)  # admitted beside others (a loaded answer): not a base sample
    lim.try_acquire()
    lim.release(0.003, 0.2, failed=True, unloaded=True)  # a fast 5xx / 429
    assert lim.base_s == pytest.approx(0.09)
    for latency in (0.10, 0.11, 0.12):  # the window moves on: the 90 ms answer drops out
        lim.try_acquire()
        lim.release(latency, 0.2, unloaded=True)
    assert lim.base_s == pytest.approx(0.10)
    with pytest.raises(ValueError, match="base_samples"):
        LimiterSettings(base_samples=-1)


def test_peek_reads_model_and_slo_and_rejects_non_bodies() -> None:
    assert peek(b'{"model": "m", "slo": {"latency_ms": 200}}') == ("m", 0.2)
    assert peek(b'{"model": "m"}') == ("m", None)
    assert peek(b'{"model": "m", "slo": {"latency_ms": "x"}}') == ("m", None)
    for bad in (b"not json", b"[1]", b'{"model": 3}', b'{"slo": {}}', b"\xff"):
        assert peek(bad) is None


class Downstream:
    """Stands in for Serve's forwarding app behind the proxy middleware: holds each request
    until released, then answers 200 with the body it received."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.gate = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        self.bodies.append(body)
        await self.gate.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def _call(app: Any, path: str, chunks: list[bytes]) -> tuple[int, bytes, dict]:
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
                for i, c in enumerate(chunks)]
    sent: list[dict] = []

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(m: dict) -> None:
        sent.append(m)
    await app({"type": "http", "method": "POST", "path": path, "headers": []}, receive, send)
    start = sent[0]
    return start["status"], b"".join(m.get("body", b"") for m in sent[1:]), dict(
        start["headers"])


def test_middleware_refuses_over_limit_fast_with_json_and_passes_bodies_whole() -> None:
    async def scenario() -> None:
        down = Downstream()
        door = FrontDoor(down, LimiterSettings(initial_limit=1, window=100))
        body = json.dumps({"model": "m", "slo": {"latency_ms": 200}}).encode()
        first = asyncio.create_task(_call(door, "/v1/classify", [body[:10], body[10:]]))
        await asyncio.sleep(0.01)
        status, payload, headers = await _call(door, "/v1/classify", [body])
        assert status == 429 and headers[b"retry-after"] == b"1"
        assert json.loads(payload)["error"]["type"] == "overloaded"
        other = asyncio.create_task(_call(door, "/v1/classify", [body.replace(b'"m"', b'"n"')]))
        jobs = asyncio.create_task(_call(door, "/v1/jobs", [body]))  # not limited
        await asyncio.sleep(0.01)
        down.gate.set()
        assert (await first)[0] == 200 and (await other)[0] == 200 and (await jobs)[0] == 200
        assert down.bodies[0] == body  # chunks replayed unchanged
        assert door.limiters["m"].inflight == 0
    asyncio.run(scenario())


def test_unparseable_body_passes_through_for_the_ingress_to_answer() -> None:
    async def scenario() -> None:
        down = Downstream()
        down.gate.set()
        door = FrontDoor(down, LimiterSettings(initial_limit=1))
        status, _, _ = await _call(door, "/v1/classify", [b"{broken"])
        assert status == 200 and down.bodies == [b"{broken"] and door.limiters == {}
    asyncio.run(scenario())


def test_serve_plain_text_refusals_become_json_and_the_rest_passes() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        text = b"Request dropped due to backpressure (num_queued_requests=1)."
        status = 503 if scope["path"] == "/busy" else 200
        kind = b"text/plain" if status == 503 else b"application/json"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", kind), (b"retry-after", b"1")]})
        await send({"type": "http.response.body", "body": text[:10], "more_body": True})
        await send({"type": "http.response.body", "body": text[10:]})

    async def scenario() -> None:
        door = FrontDoor(app)
        status, payload, headers = await _call(door, "/busy", [b""])
        assert status == 503 and headers[b"content-type"] == b"application/json"
        assert headers[b"retry-after"] == b"1" and int(headers[b"content-length"]) == len(payload)
        error = json.loads(payload)["error"]
        assert error["type"] == "overloaded" and "backpressure" in error["message"]
        status, payload, _ = await _call(door, "/ok", [b""])
        assert status == 200 and payload.startswith(b"Request dropped")  # untouched
    asyncio.run(scenario())


def test_a_429_from_behind_counts_as_late() -> None:
    async def refusing(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 429,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def scenario() -> None:
        door = FrontDoor(refusing, LimiterSettings(initial_limit=10, window=1, decrease=0.5))
        body = json.dumps({"model": "m", "slo": {"latency_ms": 10_000}}).encode()
        status, _, _ = await _call(door, "/v1/classify", [body])
        assert status == 429 and door.limiters["m"].limit == 5.0  # fast, yet late
    asyncio.run(scenario())


def test_a_late_window_with_few_in_flight_keeps_the_limit_when_busy_fraction_asks() -> None:
    """busy_fraction 0.5: lateness while in flight stayed under half the limit is the machine's,
    not the queue's: the limit stays; the same lateness with the limit half reached shrinks it."""
    s = LimiterSettings(initial_limit=10, window=4, decrease=0.5, busy_fraction=0.5,
                        base_samples=0)  # late past 0.6 x SLO, whatever the answers took
    lim = ConcurrencyLimiter(s)
    for _ in range(4):  # one at a time, all late
        lim.try_acquire()
        lim.release(0.19, 0.2)
    assert lim.limit == 10.0
    for _ in range(5):
        assert lim.try_acquire()
    for _ in range(4):
        lim.release(0.19, 0.2)
    assert lim.limit == 5.0
    with pytest.raises(ValueError):
        LimiterSettings(busy_fraction=1.5)


def test_the_door_takes_the_unloaded_latency_from_2xx_answers_admitted_alone() -> None:
    async def answering(scope: Any, receive: Any, send: Any) -> None:
        status = 400 if b'"bad"' in (await receive())["body"] else 200
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def scenario() -> None:
        door = FrontDoor(answering, LimiterSettings(initial_limit=10))
        body = json.dumps({"model": "m", "slo": {"latency_ms": 10_000}}).encode()
        bad = json.dumps({"model": "m", "slo": {"latency_ms": 10_000}, "x": "bad"}).encode()
        assert (await _call(door, "/v1/classify", [bad]))[0] == 400
        assert door.limiters["m"].base_s == 0.0  # a 4xx: not a model run
        assert (await _call(door, "/v1/classify", [body]))[0] == 200
        assert door.limiters["m"].base_s > 0.0
    asyncio.run(scenario())

    async def beside_another() -> None:
        down = Downstream()
        door = FrontDoor(down, LimiterSettings(initial_limit=10))
        body = json.dumps({"model": "m", "slo": {"latency_ms": 10_000}}).encode()
        first = asyncio.create_task(_call(door, "/v1/classify", [body]))
        await asyncio.sleep(0.01)
        second = asyncio.create_task(_call(door, "/v1/classify", [body]))
        await asyncio.sleep(0.01)
        assert door.limiters["m"].inflight == 2
        down.gate.set()
        await first
        await second
        # the first was admitted alone, the second beside it: only the first is a base sample
        assert door.limiters["m"].unloaded_answers == 1
    asyncio.run(beside_another())


@pytest.mark.parametrize("error_type, limit", [(b"unavailable", 10.0), (b"internal_error", 5.0)])
def test_a_family_with_no_live_replica_does_not_shrink_the_limit(error_type: bytes,
                                                                 limit: float) -> None:
    """The ingress's 503 `unavailable` (no live replica, ingress health) is not the limit's
    doing; any other 5xx from behind counts as late."""
    async def answering(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"),
                                (b"x-adaptserve-error", error_type)]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def scenario() -> None:
        door = FrontDoor(answering, LimiterSettings(initial_limit=10, window=1, decrease=0.5))
        body = json.dumps({"model": "m", "slo": {"latency_ms": 10_000}}).encode()
        status, _, _ = await _call(door, "/v1/classify", [body])
        assert status == 503 and door.limiters["m"].limit == limit
    asyncio.run(scenario())


def test_a_family_whose_policy_degrades_is_late_only_past_the_degrading_share() -> None:
    # base 90 ms, SLO 200 ms: a static family is late past 156 ms (0.6 of the slack), one whose
    # policy degrades past 189 ms (0.9): its 170 ms answers are the policy spending the slack
    def run(degrades: bool | None) -> float:
        lim = ConcurrencyLimiter(LimiterSettings(initial_limit=4, window=10, decrease=0.5))
        for _ in range(10):
            lim.try_acquire()
            lim.release(0.09, 0.2, unloaded=True, degrades=degrades)
        for _ in range(10):
            lim.try_acquire()
            lim.release(0.17, 0.2)  # no word on the policy: the last one stands
        return lim.limit
    assert (run(False), run(None), run(True)) == (2.0, 2.0, 4.0)
    lim = ConcurrencyLimiter(LimiterSettings(degrading_late_fraction=0.8))
    lim.try_acquire()
    lim.release(0.1, 0.2, unloaded=True, degrades=True)
    assert lim.late_after_s(0.2) == pytest.approx(0.18)
    with pytest.raises(ValueError, match="degrading_late_fraction"):
        LimiterSettings(degrading_late_fraction=0.0)


@pytest.mark.parametrize("said, degrades", [(b"1", True), (b"0", False), (None, False)])
def test_the_door_learns_from_the_ingress_whether_the_policy_degrades(said: bytes | None,
                                                                      degrades: bool) -> None:
    """The ingress's X-Adaptserve-Degrades sets the family's limiter and never reaches the
    client."""
    async def answering(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        headers = [(b"content-type", b"application/json")]
        if said is not None:
            headers.append((b"x-adaptserve-degrades", said))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})

    async def scenario() -> None:
        door = FrontDoor(answering, LimiterSettings())
        body = json.dumps({"model": "m", "slo": {"latency_ms": 200}}).encode()
        status, _, headers = await _call(door, "/v1/classify", [body])
        assert status == 200 and b"x-adaptserve-degrades" not in headers
        assert b"content-type" in headers
        assert door.limiters["m"].degrades is degrades
    asyncio.run(scenario())
