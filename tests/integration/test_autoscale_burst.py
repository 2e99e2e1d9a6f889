"""Token-throughput autoscaling in a real Serve: an image burst scales the encoder
stage up and, once quiet, back down, while the LLM stage stays at one replica, and every request
gets exactly one answer (the client's records and the ingress's count agree).

The demonstration itself (python -m bench autoscaling-burst) runs in a process of its own, on
its own local Ray deployed from serve_config.vlm.yaml (Serve takes the application-level
`autoscaling_policy` only from a config, so not on the session's shared app), shortened to fit
CI: the transformers engine (starts in seconds), a 40 s burst, a 5 s scale-down delay
(~2.5 minutes with the deploy)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.core.result import read_result

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_an_image_burst_scales_the_encoders_not_the_llm(tmp_path: Path, vlm_dir: Path) -> None:
    """On `vlm_dir`: the trained VLM where it is cached, else the tiny one (CI)."""
    out = tmp_path / "burst.json"
    cmd = [sys.executable, "-m", "bench", "autoscaling-burst", "--model-dir", str(vlm_dir),
           "--engine", "transformers", "--warm-s", "5", "--burst-s", "40", "--quiet-s", "30",
           "--text-rps", "1.5", "--burst-rps", "2.5", "--scale-down-delay-s", "5",
           "--llm-capacity", "5000", "--out", str(out), "--figure", str(tmp_path / "b.png"),
           "--history-out", str(tmp_path / "history.json")]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    checks = read_result(out)["data"]["checks"]
    assert checks["every_request_answered_once"], checks
    assert checks["encoder_peak_target_in_burst"] >= 3, checks  # decided in the burst
    # started (a new replica takes 15-40 s on a busy 2-core machine: maybe after the burst)
    assert checks["encoder_peak_running"] >= 2, checks
    assert checks["encoders_back_down_after"], checks
    assert checks["llm_stayed_put"] and checks["llm_running_min_max"] == [1, 1], checks
    # 1: a figure the demo judges missed, e.g. the second encoder served only after the burst
    # on a busy machine (wall-clock speed, which this test does not judge: the asserts above do
    # the behaviour); anything else is a crash.
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
