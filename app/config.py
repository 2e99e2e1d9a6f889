"""`AppConfig`: the serving application's configuration, validated from serve_config.yaml args.

It only composes the deployments' own configs (each lives with its deployment). Validated once
in `app.builder.build_app` and never mutated; unknown keys are errors (`extra="forbid"`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from deployments.classifier.config import ClassifierConfig
from deployments.config import (
    GRPC_MESSAGE_ENV,
    ControllerConfig,
    RequestPathConfig,
    StrictConfig,
    grpc_message_bytes,
)
from deployments.ingress.chat.config import GenerationConfig
from deployments.ingress.config import HttpConfig
from deployments.models.cache import DEFAULT_MODELS_DIR
from profiling.paths import DEFAULT_PLANS_DIR, DEFAULT_PROFILES_DIR

__all__ = ["AppConfig", "ClassifierConfig", "ControllerConfig", "HttpConfig", "PathsConfig",
           "RequestPathConfig"]


class PathsConfig(StrictConfig):
    """Artifact directories; the builder resolves them and hands files to the deployments."""

    models_dir: Path = Field(default=DEFAULT_MODELS_DIR, description="trained weights cache")
    profiles_dir: Path = Field(default=DEFAULT_PROFILES_DIR,
                               description="profile JSON files `<model>.<task>.json`")
    plans_dir: Path = Field(default=DEFAULT_PLANS_DIR,
                            description="plan JSON files `<model>.<task>.<kind>.json`")

    def resolved(self, root: Path) -> PathsConfig:
        """Relative paths made absolute against `root` (replicas may run in another cwd)."""
        def fix(p: Path) -> Path:
            return p if p.is_absolute() else (root / p).resolve()
        return PathsConfig(models_dir=fix(self.models_dir), profiles_dir=fix(self.profiles_dir),
                           plans_dir=fix(self.plans_dir))


class AppConfig(StrictConfig):
    http: HttpConfig = Field(default_factory=HttpConfig, description="HTTP ingress settings")
    request_path: RequestPathConfig = Field(
        default_factory=RequestPathConfig,
        description="where decoding happens and how calls between deployments travel")
    paths: PathsConfig = Field(default_factory=PathsConfig, description="artifact directories")
    controller: ControllerConfig = Field(default_factory=ControllerConfig,
                                         description="control plane settings")
    classifiers: list[ClassifierConfig] = Field(
        default_factory=list, description="one Serve deployment per family ([]: chat only)")
    generation: GenerationConfig | None = Field(
        default=None, description="the VLM behind /v1/chat/completions (none: classify only)")
    ensure_artifacts: bool = Field(
        default=True, description="train and profile missing models when the app is built")

    @model_validator(mode="after")
    def _serves_something(self) -> AppConfig:
        if not self.classifiers and self.generation is None:
            raise ValueError("the app serves nothing: give `classifiers` (classify families) "
                             "or `generation` (a chat model), or both")
        return self

    @model_validator(mode="after")
    def _unique_names(self) -> AppConfig:
        names = [c.name for c in self.classifiers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"classifier names must be unique; repeated: {dupes}")
        return self

    @model_validator(mode="after")
    def _timeouts(self) -> AppConfig:
        if self.controller.stale_after_s < self.controller.interval_s:
            raise ValueError("controller.stale_after_s must be >= controller.interval_s")
        return self

    @model_validator(mode="after")
    def _body_fits_a_call(self) -> AppConfig:
        path = self.request_path
        if path.handle_transport != "grpc":
            return self
        limit = grpc_message_bytes(path.replica_env)
        if 2 * self.http.max_body_bytes > limit:
            raise ValueError(
                f"http.max_body_bytes ({self.http.max_body_bytes}) must be at most half the gRPC "
                f"message limit between replicas ({limit} bytes, request_path.replica_env "
                f"{GRPC_MESSAGE_ENV}): a job's items travel in one call")
        return self

    def classifier(self, name: str) -> ClassifierConfig:
        for c in self.classifiers:
            if c.name == name:
                return c
        raise ValueError(f"unknown classifier {name!r}; valid: {[c.name for c in self.classifiers]}")
