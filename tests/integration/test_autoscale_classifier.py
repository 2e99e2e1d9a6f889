"""Items/s autoscaling of a classifier in a real Serve, without the VLM (runs in CI): one
classifier with `autoscaling:` (min 1, max 2, said to carry 5 items/s), driven at ~4x that,
gets a second replica (its policy's target 2 in /v1/status and a second RUNNING replica in
serve.status()), every request gets exactly one answer, and once quiet the target is back to 1.

The run (tests/integration/autoscale_classifier_run.py) is a process of its own on its own local
Ray with 2 CPUs (never the session's shared app); ~1.5-2 minutes with the deploy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.autoscale_classifier_run import ARGS, CAPACITY_PER_S, RATE_PER_S

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SCALE_DOWN_DELAY_S = ARGS["classifiers"][0]["autoscaling"]["scale_down_delay_s"]


@pytest.fixture(scope="module")
def run(trained_models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("autoscale-classifier") / "run.json"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "tests.integration.autoscale_classifier_run",
                           str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=400)
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-5000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def _decisions(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [s["decision"] for s in run["samples"] if s["decision"] is not None]


def test_the_load_scales_the_classifier_to_two_replicas(run: dict[str, Any]) -> None:
    loaded = [s for s in run["samples"] if s["loading"] and s["decision"] is not None]
    assert loaded, run["samples"][:5]
    # one replica until the load: the warm-up requests before it did not scale it
    assert loaded[0]["decision"]["target"] == 1 and loaded[0]["replicas"] == {"RUNNING": 1}, \
        loaded[0]
    assert {d["stage"] for d in _decisions(run)} == {"classifier"}
    assert loaded[0]["decision"]["capacity_per_s"] == pytest.approx(CAPACITY_PER_S)
    peak_load = max(s["decision"]["load_per_s"] for s in loaded)
    assert peak_load > 2 * CAPACITY_PER_S, peak_load  # items/s arriving, ~RATE_PER_S
    assert peak_load < 2 * RATE_PER_S, peak_load
    assert max(s["decision"]["target"] for s in loaded) == 2
    assert max(s["replicas"].get("RUNNING", 0) for s in run["samples"]) == 2


def test_every_request_answered_once(run: dict[str, Any]) -> None:
    records = run["records"]
    assert len(records) >= RATE_PER_S * 20
    assert not [r for r in records if "transport_error" in r or "not_json" in r]
    bad = [r for r in records if not r["ok"] and r.get("error_type") is None]
    assert not bad, bad[:5]  # not a 200 "ok": an explicit JSON error
    ok = sum(r["ok"] for r in records)
    assert ok >= 0.9 * len(records), ok
    # the ingress counted each classify request it answered once (front-door refusals: not it)
    assert ok <= run["counted_by_ingress"] <= len(records)


def test_quiet_brings_the_target_back_to_one(run: dict[str, Any]) -> None:
    assert run["back_to_one_after_load_s"] is not None, run["samples"][-5:]
    # back within the run's quiet window (QUIET_S, a hang guard), never before the policy's
    # scale-down delay: how soon within the window is the machine's speed, not the test's
    assert run["back_to_one_after_load_s"] >= SCALE_DOWN_DELAY_S
    targets = [d["target"] for d in _decisions(run)]
    assert targets[-1] == 1 and 2 in targets, targets
