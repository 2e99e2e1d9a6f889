"""Session-wide test plumbing: the shared-data gate and the trained model families.

`needs_shared` marks a test that reads `../shared/data` (the RAMSIS reference data, the Twitter
trace). Without that data it skips with the path it looked for, except in CI (`CI=true`), where it
fails: a figure the docs rely on must never pass CI by silently not running.

`trained_models_dir` trains every model family once per session into the repository's model
cache (the one `build_app` and the CLI read), or reuses it while its config hash is current, so
tests that need trained weights load them in milliseconds and the training cost shows up once,
as this fixture's setup, instead of inside whichever test happens to run first.

The VLM: the chat path's tests (serving, engines, stage profiles) run everywhere on `vlm_dir`:
the trained VLM where it is cached (or ADAPTSERVE_TEST_VLM=1 / ADAPTSERVE_TEST_VLM_DIR), else
`tiny_vlm_dir`, a tiny VLM (`TINY_VLM`, same directory layout, ~10 s to train) built once per
session, so CI exercises them on every run. Only tests of the trained VLM's *accuracy* take
`trained_vlm_dir`, which skips where the trained VLM is not cached.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deployments.models.cache import DEFAULT_MODELS_DIR
from deployments.models.vlm.config import TINY_VLM
from profiling.paths import REPO_ROOT, shared_data_dir

MODELS_DIR = REPO_ROOT / DEFAULT_MODELS_DIR  # what build_app reads when run from the repo root

needs_shared = pytest.mark.needs_shared


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing_shared_data() -> str | None:
    """Why the shared data cannot be used, or None when it is there."""
    try:
        data = shared_data_dir()
    except FileNotFoundError as err:
        return str(err)
    if not (data / "ramsis").is_dir():
        return f"shared data directory has no ramsis/: {data / 'ramsis'}"
    return None


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("needs_shared") is None:
        return
    reason = missing_shared_data()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true but the test needs ../shared/data: {reason}", pytrace=False)
    pytest.skip(f"needs ../shared/data: {reason}")


@pytest.fixture(scope="session")
def trained_models_dir() -> Path:
    """The model cache with every family trained (one torch thread: on a shared 2-core machine
    two threads spin against other processes and train several times slower)."""
    import torch

    from deployments.models.registry import ensure_trained, family_names

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for name in family_names():
            ensure_trained(name, MODELS_DIR)
    finally:
        torch.set_num_threads(threads)
    return MODELS_DIR


def vlm_dir_override() -> str | None:
    """ADAPTSERVE_TEST_VLM_DIR: a trained VLM directory the tests use as it is (a model trained
    with another config than the current one)."""
    return os.environ.get("ADAPTSERVE_TEST_VLM_DIR") or None


def vlm_tests_on() -> str | None:
    """Why the trained VLM is not used here, or None when it is: training it takes ~6-10 minutes
    on a shared 2-core machine, more than CI's 40-minute budget leaves beside the classifier
    families, so it is used where it is cached (`ensure_vlm`, e.g. after `python -m bench
    vlm-card`) or with ADAPTSERVE_TEST_VLM=1 (trains it first); ADAPTSERVE_TEST_VLM=0 never uses
    it. Where it is not used, the chat path's tests (test_autoscale_burst.py included) run on the
    tiny VLM (`vlm_dir`) and only the trained VLM's accuracy tests skip."""
    flag = os.environ.get("ADAPTSERVE_TEST_VLM", "").strip()
    if flag == "0" and not vlm_dir_override():
        return "ADAPTSERVE_TEST_VLM=0: the chat path's tests run on the tiny VLM"
    if flag == "1" or vlm_dir_override():
        return None
    from deployments.models.vlm.cache import is_current, model_dir_for
    from deployments.models.vlm.config import VlmConfig

    cfg = VlmConfig()
    if is_current(model_dir_for(cfg, MODELS_DIR), cfg):
        return None
    return ("the trained VLM is not cached and ADAPTSERVE_TEST_VLM is not 1 (training takes "
            "~10 min; see tests/conftest.py vlm_tests_on)")


@pytest.fixture(scope="session")
def trained_vlm_dir() -> Path:
    """The VLM's model directory (deployments/models/vlm), trained once into the same cache
    `build_app` reads (minutes the first time; then it loads instantly)."""
    why = vlm_tests_on()
    if why is not None:
        pytest.skip(why)
    if vlm_dir_override():
        return Path(str(vlm_dir_override()))
    from deployments.models.vlm.cache import ensure_vlm

    return ensure_vlm(MODELS_DIR)


@pytest.fixture(scope="session")
def tiny_vlm_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny VLM's model directory (`TINY_VLM`), built once per session (~10 s)."""
    from deployments.models.vlm.cache import ensure_vlm

    return ensure_vlm(tmp_path_factory.mktemp("tiny-vlm"), TINY_VLM)


@pytest.fixture(scope="session")
def vlm_dir(request: pytest.FixtureRequest) -> Path:
    """The VLM the chat path's tests serve and run the engines on: the trained one where it is
    used (`vlm_tests_on`), else the tiny one (CI). Its answers are checked only by the accuracy
    tests, which take `trained_vlm_dir`."""
    if vlm_tests_on() is None:
        return Path(request.getfixturevalue("trained_vlm_dir"))
    return Path(request.getfixturevalue("tiny_vlm_dir"))
