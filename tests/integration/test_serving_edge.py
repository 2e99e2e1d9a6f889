"""The hardened HTTP edge against a real local Serve (its own process: API keys and
ADAPTSERVE_EDGE must be in the environment before the proxy starts, edge_server.py):

- API keys: none -> 401 + WWW-Authenticate, wrong -> 401, right -> 200; /healthz open,
  /metrics and /docs protected;
- a chunked body over the limit -> 413 while it streams, long before the client has sent it;
- a stalled body -> 408 after body_read_timeout_s; 40 stalled bodies hold no ingress slot
  (the ingress takes 8 + 4 queued here), so /healthz and a classification still answer 200;
- headers never finished -> 408 header_timeout and closed after header_read_timeout_s (in
  uvicorn's protocol, header_timeout.py), while another connection is served;
- strict JSON: NaN, 1e400, deep nesting, a 5,000-digit number -> 400, "100" as latency_ms ->
  422; never a 500;
- GIF and EPS images -> 415 naming PNG, JPEG, WebP; a PNG is served;
- a wrong method -> 405 with `Allow`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.core import http
from deployments.config import CLUSTER_ENV
from profiling.paths import REPO_ROOT
from tests.helpers.images import image_b64
from tests.integration.conftest import free_port

pytestmark = pytest.mark.integration

KEY = "sk-edge-test-0001"
LIMIT = 1024 * 1024
READ_TIMEOUT_S = 5.0
HEADER_TIMEOUT_S = 3.0
ARGS: dict[str, Any] = {
    "http": {"max_body_bytes": LIMIT, "body_read_timeout_s": READ_TIMEOUT_S,
             "max_ongoing_requests": 8, "max_queued_requests": 4, "request_timeout_s": 20.0,
             "ray_actor_options": {"num_cpus": 0.05}},
    "controller": {"interval_s": 0.5, "window_s": 3.0, "stale_after_s": 3.0},
    "classifiers": [{"name": "vit", "policy": "otas", "max_batch_size": 8,
                     "max_queued_items": 64, "ray_actor_options": {"num_cpus": 0.3}}],
}
EDGE = {"max_body_bytes": LIMIT, "body_read_timeout_s": READ_TIMEOUT_S,
        "header_read_timeout_s": HEADER_TIMEOUT_S}


@dataclass(frozen=True)
class Edge:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             key: str | None = KEY, timeout_s: float = 30.0) -> http.HttpResponse:
        headers = {"content-type": "application/json"}
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        return http.request(method, self.url + path, data, headers, timeout_s)


@pytest.fixture(scope="module")
def edge(trained_models_dir: Path) -> Iterator[Edge]:
    port = free_port()
    env = {**os.environ, **CLUSTER_ENV, "RAY_AUTH_MODE": "disabled",
           "ADAPTSERVE_API_KEYS": f"sk-other-0002,{KEY}", "ADAPTSERVE_EDGE": json.dumps(EDGE)}
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-m", "tests.integration.edge_server",
                                 str(port), json.dumps(ARGS)], cwd=REPO_ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=log)
        try:
            line = proc.stdout.readline() if proc.stdout else b""
            if line.strip() != b"ready":
                log.seek(0)
                pytest.fail(f"edge server did not start: {log.read()[-3000:].decode()}")
            yield Edge(port)
        finally:
            proc.terminate()
            try:
                proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def error_of(r: http.HttpResponse, status: int, type_: str) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert err["type"] == type_, err
    return str(err["message"])


def classify(image: str, slo: Any = 3000.0) -> dict[str, Any]:
    return {"model": "vit", "inputs": {"image": image}, "slo": {"latency_ms": slo}}


def test_api_keys(edge: Edge) -> None:
    r = edge.call("POST", "/v1/classify", classify(image_b64("PNG")), key=None)
    error_of(r, 401, "missing_api_key")
    assert r.headers["www-authenticate"].startswith("Bearer")
    error_of(edge.call("GET", "/v1/models", key="sk-edge-test-0002"), 401, "invalid_api_key")
    ok = edge.call("POST", "/v1/classify", classify(image_b64("PNG")))
    assert ok.status_code == 200 and ok.json()["status"] == "ok", ok.text
    assert edge.call("GET", "/v1/models", key="sk-other-0002").status_code == 200
    assert edge.call("GET", "/healthz", key=None).status_code == 200
    for path in ("/metrics", "/docs", "/openapi.json", "/v1/status"):
        assert edge.call("GET", path, key=None).status_code == 401, path
    assert edge.call("GET", "/metrics").status_code == 200


def test_wrong_method_is_405_with_allow(edge: Edge) -> None:
    r = edge.call("GET", "/v1/classify")
    error_of(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"
    r = edge.call("DELETE", "/v1/models")
    assert r.status_code == 405 and r.headers["allow"] == "GET"


@pytest.mark.parametrize(("slo", "status", "type_"), [
    (b"NaN", 400, "malformed_json"), (b"Infinity", 400, "malformed_json"),
    (b"1e400", 400, "json_limit_exceeded"), (b"1" + b"0" * 5000, 400, "json_limit_exceeded"),
    (b'"100"', 422, "invalid_slo"),
])
def test_strict_numbers(edge: Edge, slo: bytes, status: int, type_: str) -> None:
    raw = json.dumps(classify("x", "SLO")).encode().replace(b'"SLO"', slo)
    error_of(edge.call("POST", "/v1/classify", raw=raw), status, type_)


def test_deep_nesting_is_400(edge: Edge) -> None:
    raw = json.dumps(classify("IMG")).encode().replace(b'"IMG"', b"[" * 5000 + b"]" * 5000)
    assert "deeper than" in error_of(edge.call("POST", "/v1/classify", raw=raw), 400,
                                     "json_limit_exceeded")


def test_only_png_jpeg_webp_images(edge: Edge) -> None:
    for fmt in ("GIF", "EPS"):
        r = edge.call("POST", "/v1/classify", classify(image_b64(fmt)))
        message = error_of(r, 415, "unsupported_media_type")
        assert "PNG, JPEG or WebP" in message, message
    for fmt in ("JPEG", "WEBP"):
        r = edge.call("POST", "/v1/classify", classify(image_b64(fmt)))
        assert r.status_code == 200, r.text


def _request_head(length: int | None) -> bytes:
    size = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    return (b"POST /v1/jobs HTTP/1.1\r\nHost: edge\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + KEY.encode() + b"\r\n" + size + b"\r\n\r\n")


def _read_answer(sock: socket.socket, timeout_s: float) -> bytes:
    sock.settimeout(timeout_s)
    out = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in out or not out.rstrip().endswith(b"}"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    return out


def test_chunked_body_over_the_limit_is_413_while_it_streams(edge: Edge) -> None:
    chunk = 64 * 1024
    frame = b"%x\r\n" % chunk + b" " * chunk + b"\r\n"
    sent, answer = 0, b""
    with socket.create_connection(("127.0.0.1", edge.port)) as sock:
        sock.sendall(_request_head(None))
        try:
            while sent < 400 * 1024 * 1024:  # the 400 MB, if nobody stops it
                sock.sendall(frame)
                sent += chunk
                if select.select([sock], [], [], 0)[0]:
                    break
        except OSError:  # the server closed the connection after answering
            pass
        answer = _read_answer(sock, 10.0)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"connection: close" in answer.lower() and b"payload_too_large" in answer
    assert sent < 32 * LIMIT, f"{sent} bytes sent before the answer"


def _stall(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(_request_head(100_000) + b'{"model": "vit", "items": [')
    return sock


def test_stalled_bodies_get_408_and_hold_no_ingress_capacity(edge: Edge) -> None:
    stalled = [_stall(edge.port) for _ in range(40)]  # > 8 ongoing + 4 queued at the ingress
    try:
        time.sleep(0.5)
        # were the stalled bodies holding ingress slots (8 + 4 queued < 40), these would be
        # refused 503 by Serve's back-pressure, and so would most of the stalled ones below
        assert edge.call("GET", "/healthz").status_code == 200
        ok = edge.call("POST", "/v1/classify", classify(image_b64("PNG")))
        assert ok.status_code == 200 and ok.json()["status"] == "ok", ok.text
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda s: _read_answer(s, READ_TIMEOUT_S + 60), stalled))
        for answer in answers:  # every one the edge's own 408, none a 503 from the ingress
            assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
            assert b"body_timeout" in answer and b"connection: close" in answer.lower()
    finally:
        for sock in stalled:
            sock.close()


def test_unfinished_headers_get_408_and_are_closed_while_others_are_served(edge: Edge) -> None:
    t = time.perf_counter()  # before the connection, so before its header clock starts
    with socket.create_connection(("127.0.0.1", edge.port)) as sock:
        sock.sendall(b"POST /v1/classify HTTP/1.1\r\nHost: edge\r\nX-Slow: a")
        ok = edge.call("POST", "/v1/classify", classify(image_b64("PNG")))
        assert ok.status_code == 200 and ok.json()["status"] == "ok", ok.text
        guard = time.monotonic() + HEADER_TIMEOUT_S + 60  # only to fail instead of hanging
        # a header byte every 0.5 s, never the blank line, until the answer: were each byte
        # to restart the clock (0.5 s < HEADER_TIMEOUT_S), no answer would ever come
        with contextlib.suppress(OSError):  # the server closed between select and send
            while not select.select([sock], [], [], 0.5)[0]:
                assert time.monotonic() < guard, "no 408 while header bytes trickle in"
                sock.sendall(b"a")
        answer = _read_answer(sock, 60.0)
        answered_s = time.perf_counter() - t
        sock.settimeout(60.0)
        closed = sock.recv(1) == b""
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b"header_timeout" in answer and b"connection: close" in answer.lower()
    assert closed and answered_s >= HEADER_TIMEOUT_S - 0.05, answered_s  # the timer's doing
