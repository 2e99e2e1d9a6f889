"""The huge-jobs benchmark's pure parts: job bodies within the app's limits, job outcomes from
/v1/jobs answers, attainment windows, the busy tail of a process's CPU and the checks."""

from __future__ import annotations

import json

from app.sim.replica.request_metrics import RequestRecord
from bench.experiments.huge_jobs.report import busy_after, checks, cpu_rates, window
from bench.workloads.huge_jobs import job_body, job_images, job_outcomes
from deployments.models.input_decoding import MAX_IMAGE_B64_CHARS


def test_blank_jobs_fill_the_item_cap_and_noisy_ones_the_body_limit() -> None:
    blank = job_images("blank", 256, 8 << 20)
    assert len(blank) == 256 and len(blank[0]) < 10_000
    noisy = job_images("noisy", 256, 8 << 20)
    assert 1 < len(noisy) < 256 and len(set(noisy)) == len(noisy)
    assert all(len(x) <= MAX_IMAGE_B64_CHARS for x in noisy)
    assert len(job_body("family", noisy, 200.0)) <= 8 << 20
    assert len(job_body("family", noisy + noisy[:1], 200.0)) > 8 << 20  # as many as fit


def test_job_outcomes() -> None:
    ok = json.dumps({"results": [{"status": "ok"}, {"status": "shed"}, {"status": "ok"}]})
    assert job_outcomes(200, ok.encode(), 3) == ({"ok": 2, "shed": 1}, None)
    assert job_outcomes(200, ok.encode(), 4)[0] == {"error": 4}
    err = json.dumps({"error": {"type": "job_too_large"}}).encode()
    assert job_outcomes(413, err, 257) == ({"http_413": 257}, "job_too_large")
    assert job_outcomes(503, b"busy", 5) == ({"refused": 5}, None)


def rec(i: int, latency_ms: float | None, outcome: str = "ok") -> RequestRecord:
    return RequestRecord(index=i, scheduled_s=i, sent_s=i, outcome=outcome, latency_ms=latency_ms)


def test_window_counts_refusals_as_misses() -> None:
    recs = [(100.0 + i, r) for i, r in enumerate(
        [rec(0, 50), rec(1, 250), rec(2, None, "refused"), rec(3, 20), rec(4, 10)])]
    w = window(recs, 100.0, 104.0, 200.0)
    assert w["sent"] == 4 and w["attainment"] == 0.5 and w["refused"] == 1
    assert window(recs, 200.0, 210.0, 200.0) == {"sent": 0, "attainment": None}


def test_busy_after_the_last_answer() -> None:
    # quiet 0-10 s at 0.1 cores; jobs until 20 s; the process keeps 1 core until 23 s
    cum, samples = 0.0, []
    for t in range(31):
        samples.append((float(t), {"p": cum}))
        cum += 0.1 if t < 10 else 1.0 if t < 23 else 0.1
    rates = cpu_rates(samples, "p")
    b = busy_after(rates, (0.0, 10.0), 20.0, 30.0)
    assert abs(b["quiet_cores"] - 0.1) < 1e-9 and b["busy_after_s"] == 3.0
    assert abs(b["extra_cpu_s"] - 2.7) < 1e-9
    assert busy_after(rates, (0.0, 10.0), 24.0, 30.0)["busy_after_s"] == 0.0


def test_checks_hold_other_families_to_five_points() -> None:
    phase = {"name": "blank_200ms", "jobs": {"over_cap": {"status_code": 413,
                                                          "error_type": "job_too_large"}},
             "families": {"vit": {"other_family": True, "drop_pts": 4.0},
                          "fusion": {"other_family": True, "drop_pts": 6.0},
                          "family": {"other_family": False, "drop_pts": 50.0}}}
    assert checks([phase]) == {"blank_200ms/vit drop<=5pts": True,
                               "blank_200ms/fusion drop<=5pts": False,
                               "blank_200ms over-cap job 413": True}
