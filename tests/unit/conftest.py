"""Fixtures shared by several unit test modules: the RAMSIS plan of the scheduler tests
(test_schedulers*.py), the fake ingress of the load generator's tests (test_loadgen.py,
test_front.py), and the VLM tokenizer with the ingress's renderer (test_generation_prompt.py,
test_chat_stream.py, test_chat_deadline.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from deployments.generation.prompt import PromptRenderer
from policies.schedulers.plan_types import RamsisPolicySet
from policies.schedulers.plans import RamsisPlanSettings, build_ramsis_plan
from tests.helpers.chat_renderer import tokenizer_and_renderer
from tests.helpers.fake_server import FakeServer
from tests.helpers.scheduler_harness import image_profile


@pytest.fixture(scope="module")
def ramsis_plan() -> RamsisPolicySet:
    """A small RAMSIS policy set over the synthetic image profile (solved once per module)."""
    return build_ramsis_plan(image_profile(), RamsisPlanSettings(
        slo_s=0.1, num_workers=2, min_qps=20.0, max_qps=400.0, intervals=20))


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """The fake ingress, answering at once (tests.helpers.fake_server)."""
    s = FakeServer().start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, PromptRenderer]:
    """The VLM's tokenizer and a PromptRenderer over its saved files (once per module)."""
    return tokenizer_and_renderer(tmp_path_factory.mktemp("tok"))
