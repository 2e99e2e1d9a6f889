"""Where trained weights are cached unless a caller says otherwise (the one default: the
registry, profiling, the app config, the CLI and the scripts all import it), and the lock that
serialises first uses of a cache entry (the families' registry and the VLM's cache). No torch."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_MODELS_DIR = Path(".cache/models")


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created with its folder), across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
