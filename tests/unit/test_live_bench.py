"""Pure parts of the live-bench plumbing: config overrides and the profile capacity estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.core.serve import classifier_args, profile_capacity, serve_args, with_classifier
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant

CONFIG = """
applications:
  - name: adaptserve
    args:
      classifiers:
        - {name: family, policy: ramsis, num_replicas: 1}
        - {name: vit, policy: otas}
"""


def test_config_overrides_copy_the_args(tmp_path: Path) -> None:
    path = tmp_path / "serve_config.yaml"
    path.write_text(CONFIG)
    args = serve_args(path)
    changed = with_classifier(args, "family", policy="most_accurate", num_replicas=3)
    assert classifier_args(changed, "family") == {"name": "family", "policy": "most_accurate",
                                                  "num_replicas": 3}
    assert classifier_args(args, "family")["policy"] == "ramsis"  # original untouched
    with pytest.raises(ValueError, match="fusion"):
        with_classifier(args, "fusion", policy="x")


def test_profile_capacity_picks_the_best_batch_within_half_the_slo() -> None:
    pts = tuple(LatencyPoint(b, ms, ms, ms, ms) for b, ms in ((1, 20.0), (2, 30.0), (4, 50.0),
                                                              (8, 90.0)))
    prof = Profile("p", "cpu", (VariantProfile(Variant("big"), 0.9, pts),))
    est = profile_capacity(prof, "big", slo_ms=100.0, percentile="p95", max_batch_size=8,
                           replicas=2)
    # 2 x latency <= 100 ms allows b <= 4 (50 ms): 2 replicas x 4 / 0.05 s = 160 qps.
    assert (est.batch_size, est.batch_latency_ms) == (4, pytest.approx(50.0))
    assert est.qps == pytest.approx(160.0)


def test_hops_count_a_job_once_outside_its_batches() -> None:
    from app.sim.replica.request_metrics import RequestRecord
    from bench.experiments.adaptive_vs_static.report import hops_p50_ms

    def rec(i: int, lat: float, queue: float, compute: float, job: str | None) -> RequestRecord:
        return RequestRecord(index=i, scheduled_s=0, sent_s=0, outcome="ok", latency_ms=lat,
                             queue_ms=queue, compute_ms=compute, job_id=job)

    # a job of 3 items in two batches: first starts at 30 ms, last ends at 30 + 10 + 10 = 50 ms;
    # answered at 70 ms -> 50 ms outside its batches (30 before, 20 after)
    job = [rec(0, 70, 30, 10, "j"), rec(1, 70, 30, 10, "j"), rec(2, 70, 40, 10, "j")]
    singles = [rec(3, 40, 25, 5, None), rec(4, 44, 20, 4, None)]  # 35 and 40 ms outside
    assert hops_p50_ms(job) == pytest.approx(50.0)
    assert hops_p50_ms(singles) == pytest.approx(37.5)


def test_served_times_sample_live_batches_and_scale_the_rest() -> None:
    from app.sim.replica.request_metrics import RequestRecord
    from app.sim.replica.served import ServedTimes

    v = Variant(name="m", model="m", modalities=frozenset({"image"}))
    w = Variant(name="w", model="w", modalities=frozenset({"image"}))
    prof = Profile("p", "cpu", (
        VariantProfile(v, 0.9, (LatencyPoint(1, 2.0, 3.0, 4.0, 2.5),
                                LatencyPoint(2, 10.0, 12.0, 13.0, 10.5))),
        VariantProfile(w, 0.8, (LatencyPoint(1, 1.0, 1.0, 1.0, 1.0),)),))
    # five batches of 2 on "m" (15 ms: 1.5x the profile), one item at batch size 1 (too few)
    recs = [RequestRecord(index=i, scheduled_s=0, sent_s=0, outcome="ok", variant="m",
                          batch_size=2, compute_ms=15.0) for i in range(10)]
    recs.append(RequestRecord(index=10, scheduled_s=0, sent_s=0, outcome="ok", variant="m",
                              batch_size=1, compute_ms=50.0))
    st = ServedTimes(recs, prof, min_samples=5)
    assert set(st.samples) == {("m", 2)}
    assert st.factor == pytest.approx(1.5)
    assert st("m", 2) == pytest.approx(0.015)
    assert st("m", 1) == pytest.approx(0.003)  # profile 2 ms x 1.5
    assert st("w", 1) == pytest.approx(0.0015)
    with pytest.raises(KeyError):
        st("nope", 1)


def test_call_timings_split_the_stack_time_of_answered_calls() -> None:
    from app.sim.replica.request_metrics import RequestRecord
    from app.sim.replica.served import StackDelays, call_timings

    def rec(i: int, job: str, outcome: str = "ok", q: float = 30.0) -> RequestRecord:
        # client 100 ms, server 80 ms (20 ms of HTTP), 12 ms to the replica, last batch done at
        # 30 + 10 = 40 ms after the ingress arrival -> 40 ms back to the ingress + 10 of HTTP
        return RequestRecord(index=i, scheduled_s=0, sent_s=0, outcome=outcome, latency_ms=100.0,
                             queue_ms=q, compute_ms=10.0, server_ms=80.0, dispatch_ms=12.0,
                             job_id=job, batch_size=1, variant="m")

    recs = [rec(0, "a", q=20.0), rec(1, "a"), rec(2, "b"), rec(3, "b", outcome="shed")]
    (t,) = call_timings(recs)  # job b has an unanswered item
    assert (t.to_ingress_s, t.to_replica_s, t.back_s) == pytest.approx((0.010, 0.012, 0.050))
    assert StackDelays([t]).p50_total_ms() == pytest.approx(72.0)
    with pytest.raises(ValueError):
        StackDelays([])


def test_serve_actors_are_named_by_their_process_titles() -> None:
    from bench.core.probe import actor_of

    assert actor_of("ray::ServeReplica:adaptserve:Classifier_family") == (
        "ServeReplica:adaptserve:Classifier_family")
    assert actor_of("ray::ServeReplica:bare:BareModel.handle_request ") == (
        "ServeReplica:bare:BareModel")
    assert actor_of("ray::ServeController") == "ServeController"
    assert actor_of("ray::ProxyActor.ready") == "ProxyActor"
    for other in ("ray::IDLE", "ray::DashboardAgent", "python -u worker.py", ""):
        assert actor_of(other) is None
