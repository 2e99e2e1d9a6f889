"""`classifiers: []` is a valid app, and a text-only causal LM is served like a VLM: a chat
model alone, without any classify family trained, profiled or deployed. Two runs, each a process
of its own on its own local Ray (tests/integration/chat_only_run.py, ~1-2 minutes each):

- the tiny VLM on the transformers engine, monolith: answers text and images;
- the VLM's language model exported as a Llama directory (a text-only model built locally,
  deployments/models/vlm/language_model.py) on vLLM, disaggregated mode: no encoder stage is
  deployed, an image is a 400 naming the problem, `/v1/models` says 0 images.

/v1/classify says no family is served (a 404 naming the valid ones: none)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.app_process import run_module

pytestmark = pytest.mark.integration


def _run(model_dir: Path, engine: str, mode: str, out: Path) -> dict[str, Any]:
    return run_module("tests.integration.chat_only_run", [str(model_dir), engine, mode, str(out)],
                      out)


@pytest.fixture(scope="module")
def vlm_run(tiny_vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tiny_vlm_dir, "transformers", "monolith",
                tmp_path_factory.mktemp("chat-only") / "run.json")


@pytest.fixture(scope="module")
def text_run(vlm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from deployments.models.vlm.language_model import export_language_model

    text_dir = export_language_model(vlm_dir, tmp_path_factory.mktemp("text-lm") / "llama")
    return _run(text_dir, "vllm", "disaggregated",
                tmp_path_factory.mktemp("text-only") / "run.json")


def _served_alone(run: dict[str, Any]) -> dict[str, Any]:
    assert run["healthz"]["status"] == 200, run["healthz"]
    [model] = run["models"]["body"]["data"]
    assert model["id"] == "vlm", run["models"]
    chat = run["chat"]
    assert chat["status"] == 200, chat
    assert chat["body"]["choices"][0]["finish_reason"] in ("stop", "length")
    assert 1 <= chat["body"]["usage"]["completion_tokens"] <= 4
    assert run["status"]["status"] == 200 and run["metrics"]["status"] == 200
    assert not [d for d in run["deployments"] if d.startswith(("Classifier", "Preprocess"))]
    c = run["classify"]  # no family served: a 404 naming the valid ones (none), not a 500
    assert c["status"] == 404 and "valid: []" in json.dumps(c["body"]), c
    return dict(model["adaptserve"])


def test_a_vlm_is_served_alone(vlm_run: dict[str, Any]) -> None:
    assert _served_alone(vlm_run)["max_images"] == 8
    assert vlm_run["chat_image"]["status"] == 200, vlm_run["chat_image"]


def test_a_text_only_llm_is_served_without_an_encoder(text_run: dict[str, Any]) -> None:
    info = _served_alone(text_run)
    assert info["max_images"] == 0
    assert "ImageEncoder" not in text_run["deployments"], text_run["deployments"]
    image = text_run["chat_image"]
    assert image["status"] == 400, image
    assert "takes no images" in image["body"]["error"]["message"], image
