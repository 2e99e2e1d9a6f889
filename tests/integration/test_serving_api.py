"""Happy paths on a real Serve app: classify, jobs, models, status, healthz, metrics."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.conftest import FAMILIES, Server

pytestmark = pytest.mark.integration

SLO_MS = 3000.0
DECISION_FIELDS = {"variant", "model", "modalities", "gamma", "expected_accuracy", "batch_size",
                   "queue_ms", "compute_ms", "deadline_met", "replica", "dispatch_ms"}


def classify_body(family: str, task: str, inputs: dict[str, Any],
                  slo_ms: float = SLO_MS) -> dict[str, Any]:
    return {"model": family, "task": task, "inputs": inputs, "slo": {"latency_ms": slo_ms}}


def test_healthz(server: Server) -> None:
    r = server.get("/healthz")
    assert r.status_code == 200
    assert r.json() == {"status": "ok", "models": list(FAMILIES)}


def test_models_list_variants_with_profiles(server: Server, examples) -> None:
    models = {m["name"]: m for m in server.get("/v1/models").json()["models"]}
    assert set(models) == set(FAMILIES)
    for name, m in models.items():
        assert [t["task"] for t in m["tasks"]] == list(examples[name])
        for t in m["tasks"]:
            assert t["variants"] and t["fastest_latency_ms"] > 0
            for v in t["variants"]:
                assert 0 <= v["accuracy"] <= 1 and v["latency_ms"] > 0
                assert v["latency_ms_by_batch"]["1"] == pytest.approx(v["latency_ms"])
    assert len(models["vit"]["tasks"][0]["variants"]) > 1  # several gammas
    assert set(models["fusion"]["modalities"]) == {"image", "audio", "text"}


@pytest.mark.parametrize("family", FAMILIES)
def test_classify_every_task(server: Server, examples, family: str) -> None:
    for task, items in examples[family].items():
        ex = items[0]
        r = server.post("/v1/classify", classify_body(family, task, ex.inputs))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "ok" and body["error"] is None
        assert isinstance(body["prediction"]["label"], int)
        assert 0 <= body["prediction"]["confidence"] <= 1
        d = body["decision"]
        assert set(d) == DECISION_FIELDS
        assert d["deadline_met"] and d["batch_size"] >= 1 and 0 <= d["expected_accuracy"] <= 1
        assert d["compute_ms"] > 0 and body["latency_ms"] < SLO_MS
        assert 0 <= d["dispatch_ms"] <= d["queue_ms"]  # ingress -> replica is part of the queue


@pytest.mark.parametrize("family", FAMILIES)
def test_job_fans_out_and_answers_every_item(server: Server, examples, family: str) -> None:
    task = next(iter(examples[family]))
    items = examples[family][task][:6]
    body = {"model": family, "items": [ex.inputs for ex in items], "slo": {"latency_ms": SLO_MS}}
    r = server.post("/v1/jobs", body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["job_id"] and len(out["results"]) == len(items)
    assert len({x["request_id"] for x in out["results"]}) == len(items)
    assert all(x["status"] == "ok" for x in out["results"]), out
    correct = sum(x["prediction"]["label"] == ex.label for x, ex in zip(out["results"], items, strict=True))
    assert correct >= 1  # trained models, not noise


def test_status_reports_counters_and_plans(server: Server, examples) -> None:
    for family in FAMILIES:
        task = next(iter(examples[family]))
        r = server.post("/v1/classify", classify_body(family, task, examples[family][task][1].inputs))
        assert r.status_code == 200
    time.sleep(1.5)  # two report intervals
    r = server.get("/v1/status")
    assert r.status_code == 200, r.text
    deps = r.json()["deployments"]
    assert set(deps) == set(FAMILIES)
    for d in deps.values():
        assert d["counters"]["requests"] >= 1 and d["counters"]["ok"] >= 1
        assert d["replicas"] and d["slo_attainment"] is not None
        assert d["mean_expected_accuracy"] is not None and sum(d["variants"].values()) >= 1
    assert deps["family"]["policy"] == "ramsis" and deps["family"]["selected_plans"]


def test_metrics_are_prometheus_text(server: Server) -> None:
    r = server.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert "adaptserve_http_requests_total{" in text
    assert 'adaptserve_items_total{deployment="family",outcome="deadline_met"}' in text
    assert "adaptserve_load_qps{" in text
