"""The one record every experiment writes: a `Result`.

    {"header":   {command, commit, dirty, cores, load_avg_start, load_avg_end, utc_start, utc_end},
     "settings": {...what the experiment was asked to do...},
     "checks":   [{"name", "value", "target", "ok"}, ...],
     "data":     {...the experiment's own figures...}}

An experiment opens a `Run` before it starts measuring (the header's start fields, the load
average included) and calls `Run.write` once at the end. `read_result` accepts a Result or a
record written before this format (a bare dict: its whole body is `data`).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.core.paths import REPO


@dataclass(frozen=True)
class Check:
    """One target of an experiment: the measured value, the target it is judged against (a
    number or a short rule such as ">= 2.0"), and whether it was met (None: not judged)."""

    name: str
    value: Any
    target: Any
    ok: bool | None


def checks_from_flags(flags: dict[str, Any]) -> list[Check]:
    """Checks recorded as name -> bool (or None when not judged): value is the flag itself."""
    return [Check(name, ok, True, None if ok is None else bool(ok)) for name, ok in flags.items()]


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=10, check=False).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


@dataclass
class Run:
    """The header of one experiment run: opened at the start, closed by `write`."""

    command: list[str] = field(default_factory=lambda: [sys.executable, *sys.argv])
    commit: str = field(default_factory=lambda: _git("rev-parse", "--short=12", "HEAD"))
    dirty: bool = field(default_factory=lambda: bool(_git("status", "--porcelain",
                                                          "--untracked-files=no")))
    cores: int = field(default_factory=lambda: os.cpu_count() or 0)
    load_avg_start: tuple[float, ...] = field(default_factory=lambda: tuple(os.getloadavg()))
    started: float = field(default_factory=time.time)

    def header(self) -> dict[str, Any]:
        return {"command": " ".join(self.command), "commit": self.commit, "dirty": self.dirty,
                "cores": self.cores, "load_avg_start": list(self.load_avg_start),
                "load_avg_end": list(os.getloadavg()), "utc_start": _utc(self.started),
                "utc_end": _utc(time.time())}

    def write(self, out: Path, data: Any, *, settings: dict[str, Any] | None = None,
              checks: list[Check] | None = None) -> dict[str, Any]:
        """Write the Result to `out` (JSON, non-finite numbers as null) and return it."""
        result = {"header": self.header(), "settings": settings or {},
                  "checks": [asdict(c) for c in checks or []], "data": data}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(_finite(result), indent=1) + "\n")
        return result

    def finish(self, out: Path, data: Any, *, settings: dict[str, Any],
               checks: list[Check], also: tuple[Path, ...] = ()) -> int:
        """Write the Result, say where it (and `also`, files written beside it) went, and return
        the experiment's exit status: 0, or 1 when a judged check failed."""
        self.write(out, data, settings=settings, checks=checks)
        print("wrote " + ", ".join(str(p) for p in (out, *also)))
        return 0 if all_ok(checks) else 1


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def read_result(path: Path) -> dict[str, Any]:
    """A Result from its file; a record older than this format becomes {data: its body}."""
    raw = json.loads(Path(path).read_text())
    if isinstance(raw, dict) and {"header", "data"} <= raw.keys():
        return raw
    return {"header": {}, "settings": {}, "checks": [], "data": raw}


def all_ok(checks: list[Check]) -> bool:
    """True when no judged check failed (exit status of an experiment)."""
    return all(c.ok is not False for c in checks)
