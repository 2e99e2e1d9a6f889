"""Where the artifacts live: shared data, profile files and plan files (the one place that
names them).

    <profiles_dir>/<model>.<task>.json          a profile (profiling/artifacts.py)
    <plans_dir>/<model>.<task>.<kind>.json      a plan of a PlanKind (profiling/plans.py)
    <profiles_dir>/<model>.stages.json          a generation model's stage profiles
                                                (profiling/stages.py)

Trained weights live under `deployments.models.cache.DEFAULT_MODELS_DIR`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policies.schedulers.plan_types import PlanKind

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROFILES_DIR = Path(".cache/profiles")
DEFAULT_PLANS_DIR = Path(".cache/plans")


def shared_data_dir(override: str | Path | None = None) -> Path:
    """`<repo>/../shared/data` unless told otherwise."""
    path = Path(override) if override else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(f"shared data directory not found: {path}")
    return path


def profile_name(model: str, task: str) -> str:
    """A profile's name: also the stem of its file and of its plans' files."""
    return f"{model}.{task}"


def profile_path(profiles_dir: Path, name: str) -> Path:
    """The profile file of profile `name` (`profile_name(model, task)`)."""
    return Path(profiles_dir) / f"{name}.json"


def profile_file(profiles_dir: Path, model: str, task: str) -> Path:
    return profile_path(profiles_dir, profile_name(model, task))


def plan_path(plans_dir: Path, profile: str, kind: PlanKind) -> Path:
    """The plan file of `kind` built from profile `profile`."""
    return Path(plans_dir) / f"{profile}.{kind.value}.json"


def plan_file(plans_dir: Path, model: str, task: str, kind: PlanKind) -> Path:
    return plan_path(plans_dir, profile_name(model, task), kind)


def stage_profile_file(profiles_dir: Path, model: str) -> Path:
    """The stage profiles of generation model `model` (`adaptserve profile --stages`)."""
    return Path(profiles_dir) / f"{model}.stages.json"
