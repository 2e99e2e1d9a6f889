"""Pure parts of the live-bench plumbing: config overrides and the profile capacity estimate."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.live_bench import classifier_args, profile_capacity, serve_args, with_classifier
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
    from types import SimpleNamespace

    from app.live_report import hops_p50_ms
    from app.sim.request_metrics import RequestRecord

    def rec(i: int, lat: float, queue: float, compute: float, job: str | None) -> RequestRecord:
        return RequestRecord(index=i, scheduled_s=0, sent_s=0, outcome="ok", latency_ms=lat,
                             queue_ms=queue, compute_ms=compute, job_id=job)

    # a job of 3 items in two batches: first starts at 30 ms, last ends at 30 + 10 + 10 = 50 ms;
    # answered at 70 ms -> 50 ms outside its batches (30 before, 20 after)
    job = [rec(0, 70, 30, 10, "j"), rec(1, 70, 30, 10, "j"), rec(2, 70, 40, 10, "j")]
    singles = [rec(3, 40, 25, 5, None), rec(4, 44, 20, 4, None)]  # 35 and 40 ms outside
    assert hops_p50_ms(SimpleNamespace(records=job)) == pytest.approx(50.0)  # type: ignore[arg-type]
    assert hops_p50_ms(SimpleNamespace(records=singles)) == pytest.approx(37.5)  # type: ignore[arg-type]


def test_contention_factor_and_scaled_profile() -> None:
    from app.live_calibration import contention_factor, scaled_profile
    from app.sim.request_metrics import RequestRecord

    v = Variant(name="m", model="m", modalities=frozenset({"image"}))
    prof = Profile("p", "cpu", (VariantProfile(v, 0.9, (
        LatencyPoint(1, 2.0, 3.0, 4.0, 2.5), LatencyPoint(8, 10.0, 12.0, 13.0, 10.5))),))
    recs = [RequestRecord(index=i, scheduled_s=0, sent_s=0, outcome="ok", variant="m",
                          batch_size=b, compute_ms=c)
            for i, (b, c) in enumerate([(8, 15.0), (8, 12.0), (1, 3.0), (4, 99.0)])]
    assert contention_factor(recs, prof) == pytest.approx(1.5)  # (4, 99) has no profile point
    fast = scaled_profile(prof, 1.5).by_name("m").latency[1]
    assert (fast.p50_ms, fast.p95_ms, fast.mean_ms) == pytest.approx((15.0, 18.0, 15.75))
    assert scaled_profile(prof, 1.5).by_name("m").accuracy == 0.9
