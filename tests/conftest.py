import pytest

from profiling.paths import shared_data_dir


def _has_shared() -> bool:
    try:
        return (shared_data_dir() / "ramsis").is_dir()
    except FileNotFoundError:
        return False


needs_shared = pytest.mark.skipif(not _has_shared(), reason="../shared/data not present")
