"""Tables, JSON and plots for simulation experiments (used by the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


def scenario_table(result: dict[str, Any]) -> str:
    lines = [f"SLO {result['slo_ms']:g} ms, {result['workers']} workers, trace {result['trace']}, "
             f"{result['num_queries']} queries",
             f"{'policy':<16}{'acc/satisfied':>14}{'viol %':>9}{'goodput':>10}{'p99 ms':>9}{'expected acc':>14}"]
    for name, r in result["results"].items():
        exp = f"{r['expected_accuracy']:.4f}" if "expected_accuracy" in r else "-"
        lines.append(f"{name:<16}{r['accuracy_per_satisfied']:>14.4f}{100 * r['violation_rate']:>9.4f}"
                     f"{r['goodput_qps']:>10.1f}{r['latency_p99_ms']:>9.1f}{exp:>14}")
    return "\n".join(lines)


def plot_usage(result: dict[str, Any], names: tuple[str, ...], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    policies = list(result["results"])
    fig, axes = plt.subplots(len(policies), 1, figsize=(9, 2.6 * len(policies)), squeeze=False)
    for ax, name in zip(axes[:, 0], policies, strict=True):
        usage = result["results"][name]["usage_per_second"]
        if usage:
            cols = list(zip(*usage, strict=True))
            ax.stackplot(range(len(usage)), *cols, labels=names)
        ax.set_title(f"{name}: queries per second by variant")
        ax.set_xlabel("time (s)")
    axes[0, 0].legend(fontsize=6, ncol=3, loc="upper right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
