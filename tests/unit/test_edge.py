"""The HTTP edge's pure parts and the proxy middleware that applies them: strict JSON
(deployments/ingress/proxy/strict_json.py), API keys (auth.py), bounded and timed body reads
(edge.py) and the front door's order of checks (front_door.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from deployments.ingress.proxy.auth import ApiKeys, AuthConfig, check, load_keys
from deployments.ingress.proxy.edge import (
    BodyRefused,
    ByteBudget,
    EdgeConfig,
    edge_from_env,
    read_body,
)
from deployments.ingress.proxy.front_door import FrontDoor, proxy_middlewares
from deployments.ingress.proxy.strict_json import JsonLimits, JsonProblem, loads_strict

# --- strict JSON ---------------------------------------------------------------------------


@pytest.mark.parametrize(("body", "type_", "says"), [
    (b'{"slo": {"latency_ms": NaN}}', "malformed_json", "NaN"),
    (b'{"slo": {"latency_ms": Infinity}}', "malformed_json", "Infinity"),
    (b'[-Infinity]', "malformed_json", "Infinity"),
    (b'{"slo": {"latency_ms": 1e400}}', "json_limit_exceeded", "out of range"),
    (b'{"a": [1, {"b": -1e400}]}', "json_limit_exceeded", "out of range"),
    (b"1e400", "json_limit_exceeded", "out of range"),
    (b'{"n": ' + b"7" * 5000 + b"}", "json_limit_exceeded", "5000 characters"),
    (b"[" * 3000 + b"]" * 3000, "json_limit_exceeded", "deeper than 32"),
    (b"[" * 33 + b"]" * 33, "json_limit_exceeded", "deeper than 32"),
    (b'{"model": "vit", ', "malformed_json", "not valid JSON"),
    (b"\xff\xfe\x00", "malformed_json", "not valid JSON"),
])
def test_strict_json_refuses_with_the_problem_named(body: bytes, type_: str, says: str) -> None:
    with pytest.raises(JsonProblem) as err:
        loads_strict(body)
    assert err.value.type == type_ and says in err.value.message


def test_strict_json_passes_what_the_api_sends() -> None:
    body = {"model": "fusion", "items": [{"audio": [0.5, -1, 1e-300, 1.7e308]}],
            "slo": {"latency_ms": 200, "utility": 2.5}, "n": -12345678901234567890}
    assert loads_strict(json.dumps(body).encode()) == body
    assert loads_strict(b"[" * 32 + b"]" * 32) is not None  # exactly the limit
    assert loads_strict(b'["Infinity", "NaN"]') == ["Infinity", "NaN"]  # strings are fine
    with pytest.raises(JsonProblem):
        loads_strict(b"[" * 5 + b"]" * 5, JsonLimits(max_depth=4))
    with pytest.raises(JsonProblem):
        loads_strict(b"[123456]", JsonLimits(max_number_chars=5))

# --- API keys ------------------------------------------------------------------------------


def keys_of(env: str = "", **config: Any) -> ApiKeys:
    return load_keys(AuthConfig(**config), {"ADAPTSERVE_API_KEYS": env} if env else {})


def test_no_keys_is_open_and_says_so() -> None:
    keys = keys_of()
    assert keys.open and "open" in keys.describe()
    assert check(keys, "/v1/classify", None) is None


def test_bearer_key_checked_missing_and_wrong_are_401_with_www_authenticate() -> None:
    keys = keys_of("sk-alpha-0001, sk-beta-0002\nsk-gamma-0003")
    assert len(keys.digests) == 3 and "sk-" not in keys.describe()  # never logs a key
    for good in ("Bearer sk-alpha-0001", "bearer sk-gamma-0003", "  Bearer   sk-beta-0002 "):
        assert check(keys, "/v1/classify", good) is None
    for missing in (None, "", "Bearer", "Bearer  ", "Basic c2stYWxwaGE=", "sk-alpha-0001"):
        r = check(keys, "/v1/classify", missing)
        assert r is not None and (r.status, r.type) == (401, "missing_api_key")
        assert dict(r.headers)["WWW-Authenticate"].startswith("Bearer")
    for wrong in ("Bearer sk-alpha-000", "Bearer sk-alpha-00011", "Bearer SK-ALPHA-0001",
                  "Bearer sk-alpha-0001,sk-beta-0002", "Bearer \xe9\xe9"):
        r = check(keys, "/v1/classify", wrong)
        assert r is not None and (r.status, r.type) == (401, "invalid_api_key")
        assert 'error="invalid_token"' in dict(r.headers)["WWW-Authenticate"]


def test_healthz_always_open_metrics_as_configured_docs_protected() -> None:
    protected = keys_of("sk-key-0001")
    for path in ("/healthz", "/-/healthz"):
        assert check(protected, path, None) is None
    for path in ("/metrics", "/docs", "/openapi.json", "/v1/status", "/-/routes", "/healthz/"):
        assert check(protected, path, None) is not None
    scraped = keys_of("sk-key-0001", protect_metrics=False)
    assert check(scraped, "/metrics", None) is None
    assert check(scraped, "/v1/models", None) is not None


def test_keys_from_a_file_and_a_bad_file_refuses_to_start(tmp_path: Path) -> None:
    f = tmp_path / "keys"
    f.write_text("# issued 2026-11\nsk-file-0001\n\nsk-file-0002\n")
    keys = keys_of("sk-env-0001", api_keys_file=str(f))
    assert len(keys.digests) == 3 and "file" in keys.source and "env" in keys.source
    assert check(keys, "/v1/jobs", "Bearer sk-file-0002") is None
    with pytest.raises(ValueError, match="cannot read"):
        keys_of(api_keys_file=str(tmp_path / "missing"))
    (tmp_path / "empty").write_text("# nothing yet\n")
    with pytest.raises(ValueError, match="holds no key"):
        keys_of(api_keys_file=str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="printable ASCII"):
        keys_of("sk-caf\xe9")
    assert keys_of("sk-other", api_keys_env="MY_KEYS").open  # reads only the variable named


def test_edge_config_from_env_refuses_unknown_keys() -> None:
    assert edge_from_env({}) == EdgeConfig()
    edge = edge_from_env({"ADAPTSERVE_EDGE": '{"max_body_bytes": 1024, '
                                             '"auth": {"protect_metrics": false}}'})
    assert edge.max_body_bytes == 1024 and not edge.auth.protect_metrics
    for raw in ('{"max_body_byte": 1}', '{"auth": {"api_key": "x"}}', '{"max_body_bytes": 0}'):
        with pytest.raises(ValueError):
            edge_from_env({"ADAPTSERVE_EDGE": raw})

# --- bounded, timed body reads -------------------------------------------------------------


class Stream:
    """A client's body as ASGI messages; counts what was read; `stall` never sends the rest."""

    def __init__(self, chunks: list[bytes], stall: bool = False) -> None:
        self.chunks = chunks
        self.stall = stall
        self.read = 0

    async def __call__(self) -> dict[str, Any]:
        if self.read < len(self.chunks):
            self.read += 1
            more = self.stall or self.read < len(self.chunks)
            return {"type": "http.request", "body": self.chunks[self.read - 1],
                    "more_body": more}
        if self.stall:
            await asyncio.sleep(3600)
        return {"type": "http.disconnect"}


def scope_of(path: str = "/v1/jobs", length: int | None = None,
             auth: str | None = None) -> dict[str, Any]:
    headers = [] if length is None else [(b"content-length", str(length).encode())]
    headers += [] if auth is None else [(b"authorization", auth.encode())]
    return {"type": "http", "method": "POST", "path": path, "headers": headers}


def refused(stream: Stream, scope: dict[str, Any], **kw: Any) -> BodyRefused:
    args = {"max_bytes": 1000, "timeout_s": 5.0, **kw}
    with pytest.raises(BodyRefused) as err:
        asyncio.run(read_body(stream, scope, args["max_bytes"], args["timeout_s"],
                              args.get("budget")))
    return err.value


def test_chunked_body_over_the_limit_is_refused_while_it_streams() -> None:
    stream = Stream([b"x" * 300] * 1000)  # 300 kB announced by nobody (chunked)
    err = refused(stream, scope_of())
    assert (err.status, err.type) == (413, "payload_too_large") and "1000" in err.message
    assert stream.read == 4  # stopped at the chunk that passed the limit
    ok = Stream([b"x" * 500, b"y" * 500])
    assert asyncio.run(read_body(ok, scope_of(), 1000, 5.0)) == b"x" * 500 + b"y" * 500


def test_declared_length_over_the_limit_is_refused_before_any_read() -> None:
    stream = Stream([b"x" * 10])
    err = refused(stream, scope_of(length=10**9))
    assert err.status == 413 and stream.read == 0


def test_stalled_body_is_408_after_the_timeout() -> None:
    stream = Stream([b"x" * 10], stall=True)
    err = refused(stream, scope_of(length=1000), timeout_s=0.2)
    assert (err.status, err.type) == (408, "body_timeout") and "10 bytes" in err.message


def test_bodies_arriving_at_once_share_a_budget() -> None:
    budget = ByteBudget(1500)
    budget.take(1000)  # another body still arriving
    err = refused(Stream([b"x" * 400, b"x" * 400]), scope_of(), budget=budget)
    assert err.status == 503 and budget.used == 1000  # what this one held is given back
    assert asyncio.run(read_body(Stream([b"x" * 400]), scope_of(), 1000, 5.0, budget))
    assert budget.used == 1000


def test_a_client_gone_before_its_body_is_none() -> None:
    assert asyncio.run(read_body(Stream([]), scope_of(), 1000, 5.0)) is None

# --- the front door: keys, then the body, then admission -----------------------------------


async def _answer(door: FrontDoor, stream: Stream, scope: dict[str, Any]) -> tuple[int, dict,
                                                                                  bytes]:
    sent: list[dict[str, Any]] = []

    async def send(m: dict[str, Any]) -> None:
        sent.append(m)
    await door(scope, stream, send)
    return sent[0]["status"], dict(sent[0]["headers"]), b"".join(
        m.get("body", b"") for m in sent[1:])


def test_front_door_refuses_without_key_before_reading_the_body_and_bounds_bodies() -> None:
    seen: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    door = FrontDoor(app, edge=EdgeConfig(max_body_bytes=1000, body_read_timeout_s=0.2),
                     keys=keys_of("sk-door-0001"))
    stream = Stream([b"x" * 300] * 10)
    status, headers, body = asyncio.run(_answer(door, stream, scope_of()))
    assert status == 401 and stream.read == 0 and b"www-authenticate" in headers
    assert json.loads(body)["error"]["type"] == "missing_api_key"
    auth = "Bearer sk-door-0001"
    status, headers, body = asyncio.run(_answer(door, stream, scope_of(auth=auth)))
    assert status == 413 and headers[b"connection"] == b"close" and stream.read == 4
    status, headers, _ = asyncio.run(_answer(door, Stream([b"x"], stall=True),
                                             scope_of(auth=auth)))
    assert status == 408 and headers[b"connection"] == b"close"
    status, _, _ = asyncio.run(_answer(door, Stream([b"ab", b"cd"]), scope_of(auth=auth)))
    assert status == 200 and seen == [b"abcd"]  # read whole, then handed on in one piece
    status, _, _ = asyncio.run(_answer(door, Stream([b""]), scope_of("/healthz")))
    assert status == 200  # open without a key
    assert door.budget.used == 0


def test_proxy_callback_reads_edge_and_keys_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    from uvicorn.protocols.http import auto  # the callback wraps its class (header_timeout.py)
    monkeypatch.setattr(auto, "AutoHTTPProtocol", auto.AutoHTTPProtocol)
    monkeypatch.setenv("ADAPTSERVE_EDGE", '{"body_read_timeout_s": 3}')
    monkeypatch.setenv("ADAPTSERVE_API_KEYS", "sk-proxy-0001")
    [middleware] = proxy_middlewares()
    assert middleware.kwargs["edge"].body_read_timeout_s == 3
    assert len(middleware.kwargs["keys"].digests) == 1
