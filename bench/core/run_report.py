"""JSON and PNG outputs of a load-generator run (or several runs side by side)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def write_json(path: Path, data: Any) -> None:
    """Strict JSON: NaN/inf become null, objects with `to_dict` are expanded."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean(data), indent=1, allow_nan=False))


def clean(x: Any) -> Any:
    if hasattr(x, "to_dict"):
        return clean(x.to_dict())
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    return str(x)


def plot_runs(series: dict[str, dict[str, Any]], slo_ms: float, path: Path,
              title: str = "") -> None:
    """One column per run: load and goodput, latency percentiles, variant usage over time."""
    from bench.core.plot import pyplot, save

    plt = pyplot()

    names = list(series)
    fig, axes = plt.subplots(3, len(names), figsize=(5.2 * len(names), 8.5), squeeze=False,
                             sharex="col")
    for col, name in enumerate(names):
        ts = series[name]
        t = ts["t_s"]
        ax = axes[0, col]
        ax.plot(t, ts["offered_qps"], label="offered", color="tab:gray")
        ax.plot(t, ts["goodput_qps"], label="goodput", color="tab:green")
        ax.set_title(name, fontsize=10)
        ax.set_ylabel("requests/s")
        ax.legend(fontsize=7)
        ax = axes[1, col]
        for key, style in (("latency_p50_ms", "-"), ("latency_p95_ms", "--"),
                           ("latency_p99_ms", ":")):
            ax.plot(t, ts[key], style, label=key.split("_")[1])
        ax.axhline(slo_ms, color="red", lw=0.8, label="SLO")
        ax.set_ylabel("latency of ok (ms)")
        ax.legend(fontsize=7)
        ax = axes[2, col]
        usage = ts["usage_qps"]
        if usage and ts["variants"]:
            cols = list(zip(*usage, strict=True))
            ax.stackplot(t, *cols, labels=ts["variants"])
            ax.legend(fontsize=6, loc="upper right")
        ax.set_ylabel("ok answers/s by variant")
        ax.set_xlabel("time (s)")
    save(fig, path, title=title, dpi=100)
