"""Happy paths on a real Serve app: classify, jobs, models, status, healthz, metrics."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import FAMILIES, Server

pytestmark = pytest.mark.integration

SLO_MS = 3000.0
DECISION_FIELDS = {"variant", "model", "modalities", "gamma", "expected_accuracy", "batch_size",
                   "queue_ms", "compute_ms", "deadline_met", "replica", "dispatch_ms"}


@functools.cache
def _local_model(models_dir: Path, family: str) -> Any:
    from deployments.models.registry import load_model

    return load_model(family, cache_dir=models_dir, device="cpu")


def local_prediction(models_dir: Path, family: str, task: str, variant: str,
                     inputs: dict[str, Any]) -> tuple[int, float]:
    """What the family's `variant` answers for `inputs` when run here, outside Serve."""
    model = _local_model(models_dir, family)
    v = next(x for x in model.variants() if x.name == variant)
    pred = model.run(v, task, [model.decode(inputs, task)])[0]
    return pred.label, pred.confidence


def classify_body(family: str, task: str, inputs: dict[str, Any],
                  slo_ms: float = SLO_MS) -> dict[str, Any]:
    return {"model": family, "task": task, "inputs": inputs, "slo": {"latency_ms": slo_ms}}


def test_healthz(server: Server) -> None:
    r = server.get("/healthz")
    assert r.status_code == 200
    body = r.json()
    assert (body["status"], body["models"], body["down"]) == ("ok", list(FAMILIES), [])
    assert set(body["families"]) == set(FAMILIES)


def test_models_list_variants_with_profiles(server: Server, examples,
                                            trained_models_dir: Path) -> None:
    from deployments.models.train_families import read_metadata

    models = {m["name"]: m for m in server.get("/v1/models").json()["models"]}
    assert set(models) == set(FAMILIES)
    for name, m in models.items():
        assert [t["task"] for t in m["tasks"]] == list(examples[name])
        for t in m["tasks"]:
            assert t["variants"] and t["fastest_latency_ms"] > 0
            measured = (read_metadata(name, trained_models_dir) or {})["test_accuracy"][t["task"]]
            for v in t["variants"]:
                # the catalog's accuracy is the profile's, measured on held-out data
                assert v["accuracy"] == pytest.approx(measured[v["name"]], abs=1e-4)
                assert v["latency_ms"] > 0
                assert v["latency_ms_by_batch"]["1"] == pytest.approx(v["latency_ms"])
    assert len(models["vit"]["tasks"][0]["variants"]) > 1  # several gammas
    assert set(models["fusion"]["modalities"]) == {"image", "audio", "text"}


@pytest.mark.parametrize("family", FAMILIES)
def test_classify_every_task(server: Server, examples, catalog, trained_models_dir: Path,
                             family: str) -> None:
    for task, items in examples[family].items():
        ex = items[0]
        r = server.post("/v1/classify", classify_body(family, task, ex.inputs))
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "ok" and body["error"] is None
        d = body["decision"]
        assert set(d) == DECISION_FIELDS
        label, confidence = local_prediction(trained_models_dir, family, task, d["variant"],
                                             ex.inputs)
        assert body["prediction"]["label"] == label
        assert body["prediction"]["confidence"] == pytest.approx(confidence, abs=1e-3)
        variants = {v["name"]: v for t in catalog[family]["tasks"] if t["task"] == task
                    for v in t["variants"]}
        assert d["expected_accuracy"] == pytest.approx(variants[d["variant"]]["accuracy"],
                                                       abs=1e-3)
        assert d["deadline_met"] and d["batch_size"] >= 1
        assert d["compute_ms"] > 0 and body["latency_ms"] < SLO_MS
        assert 0 <= d["dispatch_ms"] <= d["queue_ms"]  # ingress -> replica is part of the queue


@pytest.mark.parametrize("family", FAMILIES)
def test_job_fans_out_and_answers_every_item(server: Server, examples, trained_models_dir: Path,
                                             family: str) -> None:
    task = next(iter(examples[family]))
    items = examples[family][task][:6]
    body = {"model": family, "items": [ex.inputs for ex in items], "slo": {"latency_ms": SLO_MS}}
    r = server.post("/v1/jobs", body)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["job_id"] and len(out["results"]) == len(items)
    assert len({x["request_id"] for x in out["results"]}) == len(items)
    assert all(x["status"] == "ok" for x in out["results"]), out
    for x, ex in zip(out["results"], items, strict=True):  # in order, each its own answer
        label, _ = local_prediction(trained_models_dir, family, task, x["decision"]["variant"],
                                    ex.inputs)
        assert x["prediction"]["label"] == label


def test_status_reports_counters_and_plans(server: Server, examples, catalog) -> None:
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
        assert d["replicas"] and d["slo_attainment"] > 0
        assert sum(d["variants"].values()) >= 1
    for family, d in deps.items():
        accs = [v["accuracy"] for t in catalog[family]["tasks"] for v in t["variants"]]
        assert min(accs) - 1e-3 <= d["mean_expected_accuracy"] <= max(accs) + 1e-3
    assert deps["family"]["policy"] == "ramsis" and deps["family"]["selected_plans"]


def test_metrics_are_prometheus_text(server: Server) -> None:
    r = server.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert "adaptserve_http_requests_total{" in text
    assert 'adaptserve_items_total{deployment="family",outcome="deadline_met"}' in text
    assert "adaptserve_load_qps{" in text
