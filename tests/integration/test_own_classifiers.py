"""A user's own classifiers served with no training and no download (one run in a process of its
own, tests/integration/own_classifiers_run.py, ~2 minutes): three timm checkpoints profiled on a
labelled folder and chosen among by RAMSIS, a Hugging Face classifier whose id2label names come
back in answers, a TorchScript file, and a family by import path. The weights reach replicas as
paths: no deployment is bound with more than a few kB."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.app_process import run_module
from tests.helpers.own_classifiers import LABELS, TIMM_ARCHS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("own-classifiers")
    out = work / "run.json"
    result = run_module("tests.integration.own_classifiers_run", [str(work), str(out)], out,
                        timeout_s=900)
    result["work"] = str(work)
    return result


def test_the_app_serves_checkpoint_and_imported_families(run: dict[str, Any]) -> None:
    assert run["healthz"]["status"] == 200, run["healthz"]
    models = {m["id"]: m for m in run["models"]["body"]["data"]}
    assert set(models) >= {"mine", "named", "imported"}, models
    assert {"Classifier_mine", "Classifier_named", "Classifier_imported"} <= set(
        run["deployments"])
    assert run["largest_arg"]["bytes"] < 16 * 1024, run["largest_arg"]


def test_ramsis_chooses_among_the_timm_checkpoints(run: dict[str, Any]) -> None:
    plans = list(Path(run["work"], "plans").glob("mine.*"))
    assert plans, "no RAMSIS plan was built for the checkpoint family"
    for answer in run["mine"]:
        assert answer["status"] == 200, answer
        body = answer["body"]
        assert body["status"] == "ok", body
        assert body["decision"]["variant"] in TIMM_ARCHS, body["decision"]
        assert body["prediction"]["label_name"] == LABELS[body["prediction"]["label"]]
    profile = json.loads(Path(run["work"], "profiles", "mine.classify.json").read_text())
    accuracies = [v["accuracy"] for v in profile["variants"].values()] if isinstance(
        profile["variants"], dict) else [v["accuracy"] for v in profile["variants"]]
    assert len(accuracies) == len(TIMM_ARCHS) and all(0 <= a <= 1 for a in accuracies)


def test_answers_carry_the_checkpoints_own_label_names(run: dict[str, Any]) -> None:
    body = run["named"]["body"]
    assert run["named"]["status"] == 200 and body["status"] == "ok", (run["named"],
                                                                      run["serve_status"])
    assert body["prediction"]["label_name"] in LABELS, body
    assert body["decision"]["variant"] in ("hf", "script"), body


def test_an_imported_family_answers_and_bad_input_is_a_clear_error(run: dict[str, Any]) -> None:
    imported = run["imported"]
    assert imported["status"] == 200 and imported["body"]["prediction"]["label"] == 1, imported
    assert imported["body"]["prediction"]["label_name"] is None
    bad = run["bad_image"]
    assert bad["status"] == 422 and "image" in json.dumps(bad["body"]), bad
