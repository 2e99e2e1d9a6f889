"""The reliability benchmark's pure parts (the malformed set, answer parsing, RSS groups and
peaks, rows, checks, table) and its raw clients against a socket server that plays an edge."""

from __future__ import annotations

import asyncio
import json

from bench.experiments.reliability.report import figures, rss_peak, table
from bench.experiments.reliability.stats import memory_groups
from bench.workloads.hostile_bodies import malformed_set
from bench.workloads.hostile_clients import chunked_upload, judge, slow_client, status_of

VALID = {"model": "vit", "inputs": {"image": "aGVsbG8="}, "slo": {"latency_ms": 200.0}}


def test_malformed_set_names_and_bodies() -> None:
    reqs = malformed_set(VALID)
    names = [r.name for r in reqs]
    assert len(reqs) >= 60 and len(set(names)) == len(names)
    by = {r.name: r for r in reqs}
    assert by["latency_nan"].body is not None and b'"latency_ms": NaN' in by["latency_nan"].body
    assert json.loads(by["latency_numeric_string"].body or b"")["slo"]["latency_ms"] == "100"
    assert by["get_classify"].method == "GET" and by["get_classify"].body is None
    assert by["job_over_item_cap"].path == "/v1/jobs"
    assert len(json.loads(by["job_over_item_cap"].body or b"")["items"]) == 257
    assert b"[" * 5000 in (by["nesting_5000_lists"].body or b"")
    assert VALID["slo"] == {"latency_ms": 200.0}  # the valid body is left as it was


def test_answers_are_parsed() -> None:
    assert status_of(b"HTTP/1.1 408 Request Timeout\r\n") == 408
    assert status_of(b"") is None and status_of(b"garbage here") is None
    err = json.dumps({"error": {"type": "malformed_json", "message": "x"}}).encode()
    assert judge("a", 400, "application/json", err).json_error
    assert judge("a", 400, "application/json", err).error_type == "malformed_json"
    assert not judge("b", 500, "text/plain", b"Internal Server Error").json_error
    assert not judge("c", 404, "application/json", b'{"detail": "Not Found"}').json_error


def test_memory_groups_and_peaks() -> None:
    g = memory_groups({"ProxyActor#1": 600.0, "ServeReplica:adaptserve:Ingress#2": 500.0,
                       "ServeReplica:adaptserve:Ingress#3": 400.0,
                       "ServeReplica:adaptserve:Classifier_vit#4": 900.0})
    assert g == {"proxy": 600.0, "ingress": 900.0}
    samples = [(0.0, {"proxy": 1.0, "ingress": 5.0}), (1.0, {"proxy": 3.0, "ingress": 4.0}),
               (2.0, {"proxy": 9.0, "ingress": 9.0})]
    assert rss_peak(samples, 0.0, 1.5) == {"proxy": 3.0, "ingress": 5.0}
    assert rss_peak(samples, 5.0, 6.0) == {"proxy": None, "ingress": None}


def _rec(i: int, outcome: str, latency_ms: float) -> dict[str, object]:
    return {"index": i, "scheduled_s": 0.1 * i, "sent_s": 0.1 * i, "outcome": outcome,
            "latency_ms": latency_ms, "status_code": 200}


def _phase(name: str, t: float, misses: int, rss: float, **extra: object) -> dict[str, object]:
    recs = [_rec(i, "ok", 50.0) for i in range(100 - misses)]
    recs += [_rec(100 + i, "ok", 900.0) for i in range(misses)]
    return {"name": name, "start_s": t, "end_s": t + 10, "single_s": 10.0,
            "singles": {"vit": recs}, **extra}


def _run(slow_misses: int, slow_rss: float, slow_status: int) -> dict[str, object]:
    slow = [{"status": slow_status, "answer_s": 20.1, "closed": True, "sent_bytes": 28,
             "error": None, "head": ""}] * 3
    upload = {"status": 413, "answer_s": 0.3, "closed": True, "sent_bytes": 9 << 20,
              "error": None, "head": ""}
    return {"slo_ms": {"vit": 200.0}, "body_read_timeout_s": 20.0, "max_body_bytes": 8 << 20,
            "phases": [_phase("quiet", 0, 1, 100.0),
                       _phase("slowloris", 100, slow_misses, slow_rss, slow_clients=slow),
                       _phase("chunked", 200, 1, 100.0, upload=upload)],
            "rss_samples": [(5.0, {"proxy": 100.0, "ingress": 200.0}),
                            (105.0, {"proxy": slow_rss, "ingress": 200.0}),
                            (205.0, {"proxy": 105.0, "ingress": 210.0})],
            "malformed": [{"name": "n", "status": 400, "json_error": True,
                           "error_type": "malformed_json", "note": ""}]}


def test_rows_pass_within_the_targets() -> None:
    fig = figures(_run(slow_misses=4, slow_rss=109.0, slow_status=408))
    assert fig["phases"]["quiet"]["attainment"] == {"vit": 0.99}
    assert fig["passed"], table(fig)
    assert [r["passed"] for r in fig["rows"]][:2] == [None, None]
    text = table(fig)
    assert "slowloris: other traffic" in text and "malformed set: 5xx" in text


def test_rows_fail_past_the_targets() -> None:
    for misses, rss, status, failing in ((8, 100.0, 408, "slowloris: other traffic"),
                                         (1, 115.0, 408, "slowloris: RSS peak"),
                                         (1, 100.0, 200, "slowloris: the slow clients")):
        fig = figures(_run(misses, rss, status))
        assert not fig["passed"]
        assert [r["row"] for r in fig["rows"] if r["passed"] is False] == [failing]


async def _edge(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Plays the edge: 413 once more than 1 MB of body arrived, 408 after 0.5 s otherwise."""
    got = 0
    try:
        async with asyncio.timeout(0.5):
            while got < (1 << 20) and (chunk := await reader.read(65536)):
                got += len(chunk)
        answer = b"HTTP/1.1 413 Payload Too Large\r\nconnection: close\r\n\r\n{}"
    except TimeoutError:
        answer = b"HTTP/1.1 408 Request Timeout\r\nconnection: close\r\n\r\n{}"
    writer.write(answer)
    await writer.drain()
    writer.close()


def test_raw_clients_read_the_answer_and_the_close() -> None:
    async def go() -> tuple[object, object]:
        server = await asyncio.start_server(_edge, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            # 30 s: guards only (each answer comes on the edge's own cue, far sooner)
            slow = await slow_client("127.0.0.1", port, "/v1/classify", 10_000, 0.1, 30.0)
            big = await chunked_upload("127.0.0.1", port, "/v1/jobs", 100 << 20, 64 << 10, 30.0)
        return slow, big

    slow, big = asyncio.run(go())
    assert slow.status == 408 and slow.closed  # type: ignore[attr-defined]
    assert slow.answer_s is not None and slow.closed_s is not None  # type: ignore[attr-defined]
    assert slow.answer_s <= slow.closed_s  # type: ignore[attr-defined]  # answer, then close
    assert 1 < slow.sent_bytes < 10_000 - 1  # type: ignore[attr-defined]  # answered mid-body
    assert big.status == 413 and big.sent_bytes < 20 << 20  # type: ignore[attr-defined]
