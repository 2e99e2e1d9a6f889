"""The bare Serve graph and the live-bench plumbing on a private local Ray, with a fake family;
loadgen drives it over real HTTP."""

from __future__ import annotations

import pytest

from app.sim.traces.spec import TraceSpec
from bench.core import serve as lb
from bench.core.client import LoadgenConfig, build_payloads, run_load
from bench.core.http import free_port, post_bytes
from bench.core.probe import app_replicas, serve_memory
from bench.experiments.single_request import bare_graph
from bench.experiments.single_request.bare_graph import BareSettings
from bench.experiments.single_request.serve_floor import FLOOR_NAME, deploy_floor
from tests.integration.fake_family import COMPUTE_S, FakeFamily

pytestmark = pytest.mark.integration


def test_bare_graph_and_serve_floor_answer_and_memory_is_listed() -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    try:
        lb.start_ray(port, num_cpus=4)
        bare_graph.deploy_bare(base, BareSettings("fake", "/nonexistent", "big", None, 4, 1,
                                          {"num_cpus": 0.1}, 0.75,
                                          loader="tests.integration.fake_family:load_model"))
        cfg = LoadgenConfig(url=f"{base}/{bare_graph.BARE_NAME}", model="fake",
                            trace=TraceSpec("poisson", 10.0, 3.0, seed=1), slo_ms=500.0)
        examples = FakeFamily().examples("test", "argmax")
        result = run_load(cfg, build_payloads([(e.inputs, e.label) for e in examples], cfg))
        s = result.summary
        assert s.sent > 10 and s.ok == s.sent
        assert s.accuracy_of_satisfied == pytest.approx(1.0)
        assert s.expected_accuracy_of_satisfied == pytest.approx(0.75)
        assert s.compute_p50_ms >= 1000 * COMPUTE_S
        assert 0 < s.overhead_p50_ms < s.latency_p50_ms
        assert s.variant_share == {"big": 1.0}
        mem = serve_memory()
        bare = app_replicas(mem, bare_graph.BARE_NAME)
        assert {m.actor.split(":")[-1] for m in bare} == {"BareIngress", "BarePreprocess",
                                                          "BareModel"}
        assert all(m.rss_mib > 10 for m in bare)
        # Serve's no-model floor beside it: the app's answer shape, a constant, no compute
        deploy_floor(base)
        floor = run_load(LoadgenConfig(url=f"{base}/{FLOOR_NAME}", model="fake",
                                       trace=TraceSpec("poisson", 20.0, 2.0, seed=2),
                                       slo_ms=500.0), build_payloads(
            [(e.inputs, e.label) for e in examples], cfg)).summary
        assert floor.sent > 10 and floor.ok == floor.sent
        assert floor.variant_share == {"constant": 1.0} and floor.compute_p50_ms == 0.0
        bad = post_bytes(f"{base}/{FLOOR_NAME}/v1/classify", b"{")
        assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_request"
    finally:
        lb.stop_ray()
