"""Fixtures shared by the scheduler tests (test_schedulers*.py)."""

from __future__ import annotations

import pytest

from policies.schedulers.plan_types import RamsisPolicySet
from policies.schedulers.plans import RamsisPlanSettings, build_ramsis_plan
from tests.unit.scheduler_harness import image_profile


@pytest.fixture(scope="module")
def ramsis_plan() -> RamsisPolicySet:
    """A small RAMSIS policy set over the synthetic image profile (solved once per module)."""
    return build_ramsis_plan(image_profile(), RamsisPlanSettings(
        slo_s=0.1, num_workers=2, min_qps=20.0, max_qps=400.0, intervals=20))
