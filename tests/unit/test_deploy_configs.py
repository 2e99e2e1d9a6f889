"""The shipped Serve configs (serve_config.yaml, the KubeRay RayService) validate as AppConfig."""

from __future__ import annotations

from pathlib import Path

import yaml

from app.config import AppConfig

ROOT = Path(__file__).resolve().parents[2]


def _apps(doc: dict) -> list[dict]:
    return [a for a in doc["applications"] if a["import_path"] == "app.builder:build_app"]


def test_serve_config_args_validate() -> None:
    apps = _apps(yaml.safe_load((ROOT / "serve_config.yaml").read_text()))
    assert apps
    for app in apps:
        cfg = AppConfig.model_validate(app["args"])
        assert {c.name for c in cfg.classifiers} == {"family", "vit", "fusion"}


def test_rayservice_serve_config_validates_and_matches_families() -> None:
    service = yaml.safe_load((ROOT / "deploy" / "rayservice.yaml").read_text())
    apps = _apps(yaml.safe_load(service["spec"]["serveConfigV2"]))
    assert apps
    for app in apps:
        cfg = AppConfig.model_validate(app["args"])
        assert {c.name for c in cfg.classifiers} == {"family", "vit", "fusion"}
