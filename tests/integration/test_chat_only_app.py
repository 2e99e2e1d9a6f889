"""`classifiers: []` is a valid app: a chat model alone is served without any classify family
trained, profiled or deployed, and /v1/classify says no family is served (the run:
tests/integration/chat_only_run.py, a process of its own on its own local Ray, on the tiny VLM
with the transformers engine; ~1 minute)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tiny_vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("chat-only") / "run.json"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, "-m", "tests.integration.chat_only_run",
                           str(tiny_vlm_dir), str(out)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-5000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_the_chat_model_is_served_alone(run: dict[str, Any]) -> None:
    assert run["healthz"]["status"] == 200, run["healthz"]
    assert [m["id"] for m in run["models"]["body"]["data"]] == ["vlm"], run["models"]
    chat = run["chat"]
    assert chat["status"] == 200, chat
    assert chat["body"]["choices"][0]["finish_reason"] in ("stop", "length")
    assert 1 <= chat["body"]["usage"]["completion_tokens"] <= 4
    assert run["status"]["status"] == 200 and run["metrics"]["status"] == 200


def test_classify_names_no_family(run: dict[str, Any]) -> None:
    """No family served: a 404 naming the valid ones (none), not a 500."""
    c = run["classify"]
    assert c["status"] == 404, c
    assert "family" in json.dumps(c["body"]) and "[]" in json.dumps(c["body"]), c
