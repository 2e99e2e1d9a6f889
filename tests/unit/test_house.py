"""The house's size rules (docs/architecture.md): small files and short functions in the
product packages a newcomer reads first; an experiment of the benchmark tool may be one file of
up to ~600 lines (one experiment, one idea), its core stays product-sized. The layer rules are
import-linter's (.importlinter, in CI)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("policies", "app", "deployments", "profiling", "bench/core", "bench/workloads")
EXPERIMENTS = "bench/experiments"
MAX_FILE_LINES = 300
MAX_EXPERIMENT_FILE_LINES = 600
MAX_FUNCTION_LINES = 60


def _sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def _experiments() -> list[Path]:
    return sorted((ROOT / EXPERIMENTS).rglob("*.py"))


def test_sources_found() -> None:
    assert len(_sources()) > 50


def test_no_file_over_the_limit() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _sources()
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_no_experiment_file_over_its_limit() -> None:
    assert len(_experiments()) > 20
    long = {str(p.relative_to(ROOT)): n for p in _experiments()
            if (n := len(p.read_text().splitlines())) > MAX_EXPERIMENT_FILE_LINES}
    assert long == {}


def test_no_function_over_the_limit() -> None:
    long = {}
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = n
    assert long == {}
