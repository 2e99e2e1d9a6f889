"""Where trained weights are cached unless a caller says otherwise (the one default: the
registry, profiling, the app config, the CLI and the scripts all import it)."""

from __future__ import annotations

from pathlib import Path

DEFAULT_MODELS_DIR = Path(".cache/models")
