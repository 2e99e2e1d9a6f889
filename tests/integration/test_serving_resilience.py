"""A classifier replica killed under load: every request still gets one explicit answer, and
Serve brings a new replica up (runs last: alphabetical order)."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers.replica_faults import check_answer, kill_replica
from tests.integration.conftest import APP_NAME, Server

pytestmark = pytest.mark.integration


def test_killed_replica_under_load(server: Server, examples) -> None:
    task = next(iter(examples["family"]))
    pool = examples["family"][task]
    stop = threading.Event()
    seen: list[tuple[float, str]] = []  # (sent at, answer), every client's

    def client(k: int) -> None:
        i = 0
        while not stop.is_set():
            sent = time.monotonic()
            r = server.post("/v1/classify", {"model": "family", "task": task,
                                             "inputs": pool[(k * 7 + i) % len(pool)].inputs,
                                             "slo": {"latency_ms": 2000.0}}, timeout=30)
            seen.append((sent, check_answer(r)))  # every answer explicit, before and after
            i += 1

    def ok_sent_after(t: float) -> int:
        return sum(1 for sent, a in list(seen) if sent > t and a == "ok")

    with ThreadPoolExecutor(8) as ex:
        futures = [ex.submit(client, k) for k in range(8)]
        time.sleep(1.0)
        assert ok_sent_after(0.0) > 0, seen  # served before the kill
        killed = kill_replica(APP_NAME, "Classifier_family")
        killed_at = time.monotonic()
        # Serve replaces the replica: requests sent after the kill succeed again, under load
        deadline = killed_at + 120.0
        while time.monotonic() < deadline and ok_sent_after(killed_at) == 0:
            time.sleep(0.5)
        stop.set()
        for f in futures:
            f.result(timeout=60)
    after = [a for sent, a in seen if sent > killed_at]
    assert killed
    assert "ok" in after, "the family classifier never recovered under load"
