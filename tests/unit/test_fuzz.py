"""The fuzz run's plumbing (bench/experiments/fuzz/run.py, schemathesis.toml) without a server: the
config loads in the installed schemathesis and sends the key, the command is time-bounded,
and the answer table reads the server's own /metrics text. The run itself: scripts/fuzz.sh."""

from __future__ import annotations

from pathlib import Path

import pytest
from schemathesis.config import SchemathesisConfig

from app.controller.controller import PolicyController
from bench.experiments.fuzz.run import TOML, FuzzSettings, answer_counts, schemathesis_command
from deployments.ingress.metrics import IngressMetrics
from tests.helpers.controller_inputs import config, report


def test_the_config_loads_and_sends_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADAPTSERVE_API_KEYS", "sk-fuzz-0001")
    project = SchemathesisConfig.from_path(TOML).projects.get_default()
    assert project.headers == {"Authorization": "Bearer sk-fuzz-0001"}
    checks = project.checks
    negative = checks.negative_data_rejection.expected_statuses
    assert "413" in negative and not any(s.startswith("5") for s in negative)
    # positive data may get 415/422 on the POST routes only (their [[operations]] entry)
    assert "422" not in checks.positive_data_acceptance.expected_statuses
    (post,) = project.operations.operations
    widened = post.checks.positive_data_acceptance.expected_statuses
    assert {"415", "422"} <= set(widened) and not any(s.startswith("5") for s in widened)
    assert all(checks.get_by_name(name=n).enabled for n in (
        "not_a_server_error", "status_code_conformance", "content_type_conformance",
        "response_headers_conformance", "response_schema_conformance", "ignored_auth",
        "unsupported_method", "allow_header_conformance"))


def test_the_command_is_time_bounded() -> None:
    cmd = schemathesis_command(FuzzSettings(port=8123, max_time_s=42, seed=7,
                                            report_dir=Path("r")))
    assert cmd[cmd.index("--config-file") + 1] == str(TOML)
    assert "http://127.0.0.1:8123/openapi.json" in cmd
    assert cmd[cmd.index("--max-time") + 1] == "42" and cmd[cmd.index("--seed") + 1] == "7"


def test_answer_counts_read_the_servers_metrics(tmp_path: Path) -> None:
    metrics = IngressMetrics()
    for route, code in (("classify", 200), ("classify", 422), ("classify", 422), ("jobs", 413)):
        metrics.observe(route, code, 0.01)
    ctl = PolicyController(config(tmp_path), clock=lambda: 100.0)
    ctl.report(report(100.0, "r1", 10.0, ok=4, deadline_met=3, late=1, accuracy_sum=3.6))
    routes, items = answer_counts(metrics.text() + ctl.metrics_text())
    assert routes == {"classify": {"200": 1, "422": 2}, "jobs": {"413": 1}}
    assert items["deadline_met"] == 3 and items["late"] == 1
