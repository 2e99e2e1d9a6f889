"""Every bad input gets one explicit 4xx ErrorResponse naming the problem."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from bench.core.http import HttpResponse
from deployments.ingress.classify.admission import ANSWERS_MIN
from tests.integration.conftest import Server, fastest_ms

pytestmark = pytest.mark.integration


def error_of(r: HttpResponse, status: int, type_: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert err["type"] == type_, err
    assert err["message"]
    return err


def body(examples, family: str = "vit", **changes: Any) -> dict[str, Any]:
    task = next(iter(examples[family]))
    b = {"model": family, "task": task, "inputs": dict(examples[family][task][0].inputs),
         "slo": {"latency_ms": 3000.0}}
    b.update(changes)
    return b


def test_malformed_json(server: Server) -> None:
    err = error_of(server.post("/v1/classify", raw=b'{"model": "vit", '), 400, "malformed_json")
    assert "JSON" in err["message"]


def test_wrong_types_are_named(server: Server, examples) -> None:
    b = body(examples, inputs=["not", "a", "dict"])
    b["slo"] = {"latency_ms": "fast"}
    err = error_of(server.post("/v1/classify", b), 422, "invalid_request")
    assert "inputs" in err["message"] and "slo.latency_ms" in err["message"]


def test_missing_field(server: Server, examples) -> None:
    b = body(examples)
    del b["model"]
    err = error_of(server.post("/v1/classify", b), 422, "invalid_request")
    assert err["field"] == "model" and "required" in err["message"].lower()


def test_extra_field_rejected(server: Server, examples) -> None:
    err = error_of(server.post("/v1/classify", body(examples, priority=3)), 422, "invalid_request")
    assert "priority" in err["message"]


def test_invalid_base64(server: Server, examples) -> None:
    b = body(examples)
    b["inputs"]["image"] = "!!! not base64 @@@"
    err = error_of(server.post("/v1/classify", b), 422, "invalid_input")
    assert "image" in err["message"]


def test_invalid_image_bytes(server: Server, examples) -> None:
    b = body(examples)
    b["inputs"]["image"] = base64.b64encode(b"definitely not a PNG").decode()
    err = error_of(server.post("/v1/classify", b), 422, "invalid_input")
    assert "image" in err["message"]


def test_unknown_model(server: Server, examples) -> None:
    err = error_of(server.post("/v1/classify", body(examples, model="gpt-17")), 404,
                   "unknown_model")
    assert "gpt-17" in err["message"] and "vit" in err["message"]


def test_unknown_task(server: Server, examples) -> None:
    err = error_of(server.post("/v1/classify", body(examples, task="astrology")), 422,
                   "unknown_task")
    assert "astrology" in err["message"]


def test_missing_modality(server: Server, examples) -> None:
    b = body(examples, "fusion")
    del b["inputs"]["audio"]
    err = error_of(server.post("/v1/classify", b), 422, "missing_modality")
    assert "audio" in err["message"]


def test_unknown_modality(server: Server, examples) -> None:
    b = body(examples)
    b["inputs"]["smell"] = "roses"
    err = error_of(server.post("/v1/classify", b), 422, "unknown_modality")
    assert "smell" in err["message"]


def test_payload_too_large(server: Server, examples) -> None:
    b = body(examples)
    b["inputs"]["image"] = "A" * (600 * 1024)
    err = error_of(server.post("/v1/classify", b), 413, "payload_too_large")
    assert "limit" in err["message"]


@pytest.mark.parametrize("latency_ms", [0, -5])
def test_non_positive_slo(server: Server, examples, latency_ms: float) -> None:
    err = error_of(server.post("/v1/classify", body(examples, slo={"latency_ms": latency_ms})),
                   422, "invalid_slo")
    assert err["field"] == "slo.latency_ms"


def test_slo_below_fastest_variant(server: Server, examples, catalog) -> None:
    fastest = fastest_ms(catalog, "vit")
    b = body(examples, slo={"latency_ms": fastest / 2})
    err = error_of(server.post("/v1/classify", b), 422, "slo_unachievable")
    assert f"{fastest:.3f} ms" in err["message"] and "vit/" in err["message"]


def test_slo_below_the_paths_fastest_answer(server: Server, examples, catalog) -> None:
    """Above the fastest variant's model time but below what the whole path has ever done
    (model run plus the hops): a 422 saying so, not a 429 with a negative time left."""
    for _ in range(ANSWERS_MIN):  # answers enough for the fastest of them to count
        assert server.post("/v1/classify", body(examples)).status_code == 200
    b = body(examples, slo={"latency_ms": fastest_ms(catalog, "vit") + 0.5})
    err = error_of(server.post("/v1/classify", b), 422, "slo_unachievable")
    assert "fastest answer this server has given vit lately" in err["message"], err


def test_bad_item_in_job_is_named(server: Server, examples) -> None:
    task = next(iter(examples["vit"]))
    items = [dict(ex.inputs) for ex in examples["vit"][task][:3]]
    items[2]["image"] = "%%%"
    b = {"model": "vit", "items": items, "slo": {"latency_ms": 3000.0}}
    err = error_of(server.post("/v1/jobs", b), 422, "invalid_input")
    assert err["field"] == "items[2]"


def test_empty_job_rejected(server: Server) -> None:
    b = {"model": "vit", "items": [], "slo": {"latency_ms": 3000.0}}
    error_of(server.post("/v1/jobs", b), 422, "invalid_request")


def test_unknown_route_is_json(server: Server) -> None:
    error_of(server.get("/v1/nothing"), 404, "not_found")
    error_of(server.get("/v1/classify"), 405, "method_not_allowed")


def test_job_over_the_item_cap(server: Server, examples) -> None:
    task = next(iter(examples["vit"]))
    item = dict(examples["vit"][task][0].inputs)
    b = {"model": "vit", "items": [item] * 257, "slo": {"latency_ms": 3000.0}}
    err = error_of(server.post("/v1/jobs", b), 413, "job_too_large")
    assert "at most 256 items" in err["message"] and err["field"] == "items"
