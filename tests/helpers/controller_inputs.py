"""Inputs of the policy controller: an AppConfig of one classifier family ("fam") and a
replica's report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.config import AppConfig
from deployments.wire import ReplicaReport


def config(tmp: Path, **classifier: Any) -> AppConfig:
    return AppConfig.model_validate({
        "paths": {"plans_dir": str(tmp)},
        "controller": {"interval_s": 0.5, "stale_after_s": 2.0},
        "classifiers": [{"name": "fam", **classifier}]})


def report(t: float, replica: str = "r1", load: float = 10.0, **counters: float) -> ReplicaReport:
    return ReplicaReport("fam", replica, t, load, 3, counters=counters,
                         variant_counts={"v": int(counters.get("ok", 0))},
                         plan_versions={"task": "old"})
