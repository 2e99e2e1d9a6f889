"""Where shared data lives: `<repo>/../shared/data` unless told otherwise."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def shared_data_dir(override: str | Path | None = None) -> Path:
    path = Path(override) if override else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        raise FileNotFoundError(f"shared data directory not found: {path}")
    return path
