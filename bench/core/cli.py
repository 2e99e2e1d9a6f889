"""The flags every experiment shares, defined once: `--out`, `--seed`, `--port`, `--config`.

    parser = experiment_parser(__doc__, out="docs/data_x.json", seed=0)

adds only the shared flags the experiment names (with its defaults), so `--help` shows what it
uses. `--repeats` is the dispatcher's (`python -m bench`), not the experiment's.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

_SHARED: dict[str, tuple[type, str]] = {
    "out": (Path, "where the Result (JSON) is written; tables and plots go beside it"),
    "seed": (int, "seed of every random choice (arrivals, payloads, sampling)"),
    "port": (int, "HTTP port of the server under test"),
    "config": (Path, "serve config the experiment deploys"),
}


def experiment_parser(description: str | None, **shared: Any) -> argparse.ArgumentParser:
    """An argparse parser with the named shared flags; each keyword's value is its default."""
    parser = argparse.ArgumentParser(description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    for name, default in shared.items():
        if name not in _SHARED:
            raise ValueError(f"unknown shared flag {name!r}; shared flags: {sorted(_SHARED)}")
        kind, text = _SHARED[name]
        value = kind(default) if default is not None else None
        parser.add_argument(f"--{name}", type=kind, default=value,
                            help=f"{text} (default {default})")
    return parser


def settings_of(args: Any) -> dict[str, Any]:
    """An experiment's parsed arguments (a Namespace, a dict, or a settings object: its
    `to_dict()` where it has one) as a Result's `settings`: paths as strings, tuples as lists,
    dataclasses as dicts, anything else JSON cannot hold as its str()."""
    if hasattr(args, "to_dict"):
        items = args.to_dict()
    elif is_dataclass(args) and not isinstance(args, type):
        items = asdict(args)
    else:
        items = vars(args) if hasattr(args, "__dict__") else dict(args)
    return {k: _plain(v) for k, v in items.items()}


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, bool | int | float | str):
        return v
    if isinstance(v, Path):
        return str(v)
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if is_dataclass(v) and not isinstance(v, type):
        return _plain(asdict(v))
    return str(v)


def log_progress(timestamps: bool = False) -> None:
    """Warnings from everything, the benchmark's own progress lines (logger "bench") at INFO."""
    logging.basicConfig(level=logging.WARNING,
                        format="%(asctime)s %(message)s" if timestamps else "%(message)s")
    logging.getLogger("bench").setLevel(logging.INFO)
