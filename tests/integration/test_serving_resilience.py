"""A classifier replica killed under load: every request still gets one explicit answer, and
Serve brings a new replica up (runs last: alphabetical order)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.bench.http import HttpResponse
from tests.integration.conftest import APP_NAME, Server

pytestmark = pytest.mark.integration

OK_STATUSES = {"ok", "deadline_exceeded", "shed"}
ERROR_TYPES = {"replica_unavailable", "internal_error", "unavailable"}


def kill_replica(deployment: str) -> str:
    import ray

    for actor in ray.util.list_named_actors(all_namespaces=True):
        name = actor["name"]
        if name.startswith("SERVE_REPLICA::") and f"{APP_NAME}#{deployment}#" in name:
            ray.kill(ray.get_actor(name, namespace=actor["namespace"]), no_restart=True)
            return name
    raise AssertionError(f"no replica of {deployment} found")


def check_answer(r: HttpResponse) -> str:
    """One JSON answer: a result (200), a fast refusal (429 `overloaded` with Retry-After: the
    ingress sees the drained replica's answers slow down) or an explicit error (5xx)."""
    body = r.json()
    if r.status_code == 200:
        assert body["status"] in OK_STATUSES, body
        return body["status"]
    if r.status_code == 429:
        assert body["error"]["type"] == "overloaded" and int(r.headers["retry-after"]) >= 1, r.text
        return "overloaded"
    assert r.status_code in (500, 503), r.text
    assert body["error"]["type"] in ERROR_TYPES, body
    if body["error"]["type"] == "unavailable":  # the family has no live replica: fast 503
        assert int(r.headers["retry-after"]) >= 1, r.headers
    return body["error"]["type"]


def test_killed_replica_under_load(server: Server, examples) -> None:
    task = next(iter(examples["family"]))
    pool = examples["family"][task]
    stop = threading.Event()

    def client(k: int) -> list[str]:
        seen, i = [], 0
        while not stop.is_set():
            r = server.post("/v1/classify", {"model": "family", "task": task,
                                             "inputs": pool[(k * 7 + i) % len(pool)].inputs,
                                             "slo": {"latency_ms": 2000.0}}, timeout=30)
            seen.append(check_answer(r))
            i += 1
        return seen

    with ThreadPoolExecutor(8) as ex:
        futures = [ex.submit(client, k) for k in range(8)]
        time.sleep(1.0)
        killed = kill_replica("Classifier_family")
        time.sleep(3.0)
        stop.set()
        answers = [a for f in futures for a in f.result(timeout=60)]
    assert killed and len(answers) >= 8
    assert "ok" in answers
    # Serve replaces the replica: requests succeed again
    deadline = time.time() + 120
    while time.time() < deadline:
        r = server.post("/v1/classify", {"model": "family", "task": task,
                                         "inputs": pool[0].inputs,
                                         "slo": {"latency_ms": 2000.0}}, timeout=30)
        if r.status_code == 200 and r.json()["status"] == "ok":
            return
        check_answer(r)
        time.sleep(1.0)
    raise AssertionError("the family classifier never recovered")
