"""The one plot helper of the experiments: matplotlib without a display, and a figure saved
where asked (its folder made) and closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display: CI, servers)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path, *, title: str | None = None, dpi: int = 100) -> None:
    """Title (optional), tight layout, the PNG written (its folder made), the figure closed."""
    plt = pyplot()
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
