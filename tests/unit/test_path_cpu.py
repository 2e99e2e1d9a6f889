"""The single-request benchmark's path CPU (bench/experiments/single_request/path_cpu.py): the
model's compute taken out of the server's CPU per call, and the app's path judged against
Serve's no-model floor at the same rate. No Ray: records and CPU readings made up."""

from __future__ import annotations

import pytest

from app.sim.replica.request_metrics import RequestRecord
from bench.experiments.single_request.path_cpu import (
    model_ms_per_call,
    path_cpu,
    path_figures,
    path_lines,
)


def _rec(i: int, outcome: str = "ok", compute_ms: float | None = 8.0,
         batch: int | None = 2) -> RequestRecord:
    return RequestRecord(i, 0.0, 0.0, outcome, latency_ms=20.0, compute_ms=compute_ms,
                         batch_size=batch)


def test_model_compute_per_call_shares_each_batch_and_counts_every_call() -> None:
    records = [_rec(0), _rec(1), _rec(2, "refused", None, None), _rec(3, compute_ms=6.0, batch=1)]
    # (8/2 + 8/2 + 6/1) over 4 calls; the refusal computed nothing but is a call
    assert model_ms_per_call(records) == pytest.approx(14.0 / 4)
    assert model_ms_per_call([]) == 0.0


def test_server_cpu_leaves_the_load_generator_out_and_the_path_the_model() -> None:
    cpu = {"machine": 30.0, "driver": 6.0, "ProxyActor": 5.0, "ServeReplica:a:Ingress": 7.0,
           "ServeReplica:a:ladder": 10.0}
    c = path_cpu("app_1x", 40.0, cpu, [_rec(0, batch=1), _rec(1, batch=1)])
    assert (c.server_ms, c.serve_ms, c.model_ms) == (24.0, 22.0, 8.0)
    assert c.path_ms == 16.0
    assert c.to_dict()["path_ms"] == 16.0


def test_the_path_is_judged_against_serve_s_floor_at_the_same_rate() -> None:
    app = path_cpu("app_1x", 40.0, {"machine": 26.0, "driver": 2.0}, [_rec(0, batch=1)])
    floor = path_cpu("serve_floor_at_app_1x", 40.0, {"machine": 14.0, "driver": 2.0},
                     [_rec(0, compute_ms=0.0, batch=1)])
    torch = path_cpu("torch_capacity", 20.0, {"machine": 12.0, "driver": 2.0}, [_rec(0, batch=1)])
    f = path_figures({c.run: c for c in (app, floor, torch)})
    assert f["path_over_serve_floor"] == pytest.approx(16.0 / 12.0)
    assert f["path_over_torch"] == pytest.approx(16.0 / 2.0)
    assert f["path_within_target"] is False  # 1.33x over the 1.25x target
    assert any("1.33x" in line for line in path_lines(f))
    missing = path_figures({"app_1x": app})
    assert missing["path_over_serve_floor"] is None and missing["path_within_target"] is None
