"""What the live benchmark reads about the family under test: its resolved config, its task
and the profile its policies decide from (the same files the deployed app uses)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policies.profile import Profile, VariantProfile

if TYPE_CHECKING:
    from app.config import AppConfig
    from deployments.classifier.config import ClassifierConfig


@dataclass(frozen=True)
class FamilySetup:
    cfg: AppConfig
    classifier: ClassifierConfig
    task: str
    profile: Profile

    def most_accurate(self) -> VariantProfile:
        variants = self.profile.variants
        return variants[max(range(len(variants)), key=lambda i: variants[i].accuracy)]


def family_setup(args: dict[str, Any], family: str) -> FamilySetup:
    """The family's config, first task and profile under the app `args` (artifacts must exist:
    deploying the app, or `app.builder.ensure_artifacts`, makes them)."""
    from app.builder import load_config
    from deployments.models.registry import load_model
    from profiling.artifacts import load_profile
    from profiling.paths import profile_file

    cfg = load_config(args)
    ccfg = cfg.classifier(family)
    task = (ccfg.tasks or list(load_model(family, cache_dir=cfg.paths.models_dir,
                                          device="cpu").tasks()))[0]
    profile = load_profile(profile_file(cfg.paths.profiles_dir, family, task))
    return FamilySetup(cfg, ccfg, task, profile)
