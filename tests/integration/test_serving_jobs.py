"""Jobs within bounds on a real Serve app: a job over the item cap is refused before any work, a
job whose deadline is lost stops being decoded (the classifier's `decoded` counter in
/v1/status shows the rest was never decoded nor run), and while huge jobs keep one family's
classifier decoding, single requests of the other families still answer within their SLO.

The jobs carry blank 1024x1024 RGB PNGs (bench/workloads/huge_jobs.py): ~4 KB each on the wire,
~10 ms each to decode, the cheapest way to make a classifier work hard."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Any

import pytest

from bench.core.http import HttpTransportError
from bench.workloads.huge_jobs import job_images
from tests.integration.conftest import TEST_ARGS, Server, fastest_ms

pytestmark = pytest.mark.integration

JOB_FAMILY = "family"
QUEUE = next(c["max_queued_items"] for c in TEST_ARGS["classifiers"] if c["name"] == JOB_FAMILY)
JOB_ITEMS = QUEUE // 2  # http.max_job_queue_share (0.5): the most one job may hold
ITEM_CAP = 256  # http.max_items_per_job (default)


@pytest.fixture(scope="module")
def blank() -> str:
    return job_images("blank", 1, 1 << 30)[0]


@pytest.fixture(scope="module")
def decode_s(blank: str) -> float:
    """Seconds to decode one blank image here (the median of a few)."""
    from deployments.models.data import IMAGE_SIZE
    from deployments.models.input_decoding import decode_image

    times = []
    for _ in range(5):
        t = time.perf_counter()
        decode_image(blank, "image", IMAGE_SIZE, IMAGE_SIZE)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def counters(server: Server, family: str) -> dict[str, float]:
    """The family's counters once every replica report has reached the controller (two reads a
    report interval apart agree)."""
    interval_s = TEST_ARGS["controller"]["interval_s"]
    last = None
    for _ in range(20):
        time.sleep(2 * interval_s)
        now = server.get("/v1/status").json()["deployments"][family]["counters"]
        if now == last:
            return dict(now)
        last = now
    raise AssertionError(f"{family} counters never settled: {last}")


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before.get(k, 0) for k in after}


def job(items: list[dict[str, Any]], slo_ms: float) -> dict[str, Any]:
    return {"model": JOB_FAMILY, "items": items, "slo": {"latency_ms": slo_ms}}


def test_job_over_the_item_cap_runs_nothing(server: Server, examples) -> None:
    task = next(iter(examples[JOB_FAMILY]))
    item = dict(examples[JOB_FAMILY][task][0].inputs)
    before = counters(server, JOB_FAMILY)
    r = server.post("/v1/jobs", job([item] * (ITEM_CAP + 1), 5000.0))
    assert r.status_code == 413, r.text
    err = r.json()["error"]
    assert err["type"] == "job_too_large" and err["field"] == "items"
    d = delta(counters(server, JOB_FAMILY), before)
    assert d["requests"] == 0 and d["decoded"] == 0 and d["batch_items"] == 0, d
    text = server.get("/metrics").text
    assert f'adaptserve_admission_refused_total{{family="{JOB_FAMILY}",reason="job_too_large"}}' \
        in text


def test_job_whose_deadline_is_lost_stops_being_decoded(server: Server, blank: str,
                                                        decode_s: float, catalog) -> None:
    """Decoding the whole job takes ~3x its SLO: decoding stops at the deadline, every item is
    answered deadline_exceeded at about the deadline, and the rest is never decoded nor run.
    (Before any other job to the family in this file: the ingress's drain estimate takes a
    job's whole latency as the family's unloaded time and would refuse this job, 429.)"""
    slo_ms = max(1000 * JOB_ITEMS * decode_s / 3, 4 * fastest_ms(catalog, JOB_FAMILY))
    full_decode_ms = 1000 * JOB_ITEMS * decode_s
    assert full_decode_ms >= 2 * slo_ms, "the job would not outlast its deadline"
    before = counters(server, JOB_FAMILY)
    r = server.post("/v1/jobs", job([{"image": blank}] * JOB_ITEMS, slo_ms))
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["status"] for x in results] == ["deadline_exceeded"] * JOB_ITEMS
    assert all(x["error"] and x["prediction"] is None for x in results)
    d = delta(counters(server, JOB_FAMILY), before)
    # answered at the deadline, not after the whole decode: decoding stopped, the rest never
    # decoded (an answer that waited for the decode to finish would have decoded them all)
    assert d["decoded"] < JOB_ITEMS, (d, slo_ms)
    assert d["batch_items"] == 0, d  # nothing ran on the model
    assert d["requests"] == JOB_ITEMS and d["deadline_exceeded"] == JOB_ITEMS, d  # counted


def test_job_with_time_to_spare_is_decoded_and_run_whole(server: Server, blank: str) -> None:
    before = counters(server, JOB_FAMILY)
    r = server.post("/v1/jobs", job([{"image": blank}] * JOB_ITEMS, 10_000.0))
    assert r.status_code == 200, r.text
    assert [x["status"] for x in r.json()["results"]] == ["ok"] * JOB_ITEMS
    d = delta(counters(server, JOB_FAMILY), before)
    assert d["decoded"] == JOB_ITEMS and d["batch_items"] == JOB_ITEMS, d


class JobSenders:
    """Threads sending the same huge job back to back; (sent, answered, HTTP status) each."""

    def __init__(self, server: Server, body: dict[str, Any], senders: int) -> None:
        self.server, self.body = server, body
        self.stop = threading.Event()
        self.jobs: list[tuple[float, float, int]] = []
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(senders)]

    def _run(self) -> None:
        while not self.stop.is_set():
            sent = time.time()
            try:
                status = self.server.post("/v1/jobs", self.body, timeout=60.0).status_code
            except HttpTransportError:
                status = 0
            self.jobs.append((sent, time.time(), status))
            if status != 200:
                time.sleep(0.2)

    def in_flight(self, lo_s: float, hi_s: float) -> bool:
        return any(s <= lo_s and a >= hi_s for s, a, _ in self.jobs)

    def __enter__(self) -> JobSenders:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=90)


def test_other_families_answer_in_time_while_huge_jobs_run(server: Server, blank: str,
                                                           examples) -> None:
    """Two senders keep the job family's queue share full of blank images to decode; single
    requests of the two other families, sent while a job is in flight, answer within SLO."""
    slo_ms = 200.0
    probes = [(f, next(iter(examples[f]))) for f in ("vit", "fusion")]
    before = counters(server, JOB_FAMILY)
    out = []
    with JobSenders(server, job([{"image": blank}] * JOB_ITEMS, 10_000.0), 2) as senders:
        time.sleep(0.3)
        for i in range(20):
            family, task = probes[i % 2]
            inputs = examples[family][task][i % len(examples[family][task])].inputs
            sent = time.time()
            r = server.post("/v1/classify", {"model": family, "task": task, "inputs": inputs,
                                             "slo": {"latency_ms": slo_ms}})
            out.append((sent, time.time(), family, r.status_code, r.json()))
            time.sleep(0.1)
    answered_jobs = [j for j in senders.jobs if j[2] == 200]
    assert len(answered_jobs) >= 2, senders.jobs
    assert delta(counters(server, JOB_FAMILY), before)["decoded"] >= 2 * JOB_ITEMS
    during = [o for o in out if senders.in_flight(o[0], o[1])]
    assert len(during) >= 15, f"only {len(during)} of 20 probes overlapped a job"
    assert all(code == 200 and body["status"] == "ok" for *_, code, body in during), during
    late = [(f, round(1000 * (a - s))) for s, a, f, _, _ in during if 1000 * (a - s) > slo_ms]
    assert len(late) <= len(during) // 10, late
