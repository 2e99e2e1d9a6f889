"""The generation benchmark's table and plot (from the run's dict, before or after JSON)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def _get(s: Any, key: str) -> Any:
    return s.get(key) if isinstance(s, dict) else getattr(s, key)


def _f(x: Any, nd: int = 0) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return f"{x:.{nd}f}"


HEADER = (f"{'system':<20} {'rps':>5} {'sent':>5} {'ok':>5} {'TTFT p50':>9} {'p99':>7} "
          f"{'p99 all':>8} {'TBT p50':>8} {'p99':>6} {'e2e p99':>8} {'SLO att':>8} "
          f"{'acc':>6} {'acc+h':>6}  errors")


def run_line(name: str, s: Any) -> str:
    errors = _get(s, "errors") or {}
    return (f"{name:<20} {_get(s, 'rate_rps'):>5g} {_get(s, 'sent'):>5} {_get(s, 'ok'):>5} "
            f"{_f(_get(s, 'ttft_p50_ms')):>9} {_f(_get(s, 'ttft_p99_ms')):>7} "
            f"{_f(_get(s, 'ttft_p99_all_ms')):>8} {_f(_get(s, 'tbt_p50_ms'), 1):>8} "
            f"{_f(_get(s, 'tbt_p99_ms'), 1):>6} {_f(_get(s, 'e2e_p99_ms')):>8} "
            f"{_f(_get(s, 'slo_attainment'), 3):>8} {_f(_get(s, 'accuracy'), 3):>6} "
            f"{_f(_get(s, 'accuracy_with_history'), 3):>6}  "
            + (", ".join(f"{k}={v}" for k, v in sorted(errors.items())) or "-"))


def report(out: dict[str, Any]) -> str:
    slo = out["settings"]["slo_ms"]
    lines = [f"generation benchmark, commit {out['commit']}"
             + (f" (+{len(out['modified'])} modified files)" if out["modified"] else "")
             + f", {out['machine_cores']} cores, load avg at start "
             f"{_f(out['loadavg_at_start'][0], 2)}, TTFT SLO {slo:g} ms (times in ms)",
             HEADER]
    for name, v in out["systems"].items():
        if "skipped" in v:
            lines.append(f"{name:<20} skipped: {v['skipped']}")
            continue
        if v.get("failed"):
            lines.append(f"{name:<20} FAILED: {v['failed'].splitlines()[0][:200]} "
                         f"(log {v.get('log')})")
        warm_bad = [w for w in v.get("warmup", []) if w["status"] != "ok"
                    or w["text"].strip() != w["expected"]]
        if warm_bad:
            lines.append(f"{name:<20} warm-up: {len(warm_bad)} not ok/correct: "
                         + "; ".join(f"{w['task']} {w['status']} {w['text']!r}"
                                     for w in warm_bad[:3]))
        idle = v.get("idle_ttft_ms") or {}
        if idle:
            lines.append(f"{name:<20} idle TTFT (one request at a time), ms: "
                         + ", ".join(f"{t}={_f(x, 1)}" for t, x in idle.items()))
        for s in v.get("ramp", []):
            lines.append(run_line(name, s))
    lines.append("acc: exact answers of requests without earlier turns (the model card's "
                 "held-out accuracy); acc+h: of those with earlier turns (the VLM is trained on "
                 "single turns: compare between loads only)")
    lines += _checks_lines(out.get("checks") or {})
    return "\n".join(lines)


def _checks_lines(checks: dict[str, Any]) -> list[str]:
    if not checks:
        return []
    fig = checks.get("figures", {})
    lines = ["", "max load with P99 TTFT (failures infinite) under the SLO, rps: "
             + ", ".join(f"{n}={_f(v, 2) if v is not None else 'none'}"
                         for n, v in fig.get("max_load_under_slo_rps", {}).items()),
             f"monolith's knee (first rate over the SLO): {fig.get('monolith_knee_rps')}",
             "P99 TTFT at that knee, ms: " + ", ".join(
                 f"{n}={_f(v)}" for n, v in fig.get("p99_ttft_at_knee_ms", {}).items()),
             "light-load P50 TTFT, ms: " + ", ".join(
                 f"{n}={_f(v, 1)}" for n, v in fig.get("light_load_ttft_p50_ms", {}).items()),
             "checks:"]
    for k, v in checks.get("pass", {}).items():
        lines.append(f"  {'PASS' if v else ('n/a ' if v is None else 'FAIL')}  {k}")
    return lines


def plot(out: dict[str, Any], path: Path) -> None:
    from bench.core.plot import pyplot, save

    plt = pyplot()

    slo = out["settings"]["slo_ms"]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, v in out["systems"].items():
        ramp = v.get("ramp") or []
        if not ramp:
            continue
        rates = [_get(s, "rate_rps") for s in ramp]
        p99 = [_cap(_get(s, "ttft_p99_all_ms"), slo) for s in ramp]
        ax.plot(rates, p99, marker="o", label=name)
        ax2.plot(rates, [_get(s, "slo_attainment") or 0.0 for s in ramp], marker="o",
                 label=name)
    ax.axhline(slo, color="grey", linestyle="--", label=f"SLO {slo:g} ms")
    ax.set_yscale("log")
    ax.set_xlabel("offered load (requests/s)")
    ax.set_ylabel("P99 TTFT, failures as infinite (ms; capped at 20x SLO)")
    ax.legend(fontsize=8)
    ax2.set_xlabel("offered load (requests/s)")
    ax2.set_ylabel("TTFT SLO attainment (of sent)")
    ax2.set_ylim(0, 1.05)
    fig.suptitle(f"Generation: mixed text / 1-8 image traffic with image bursts "
                 f"(commit {out['commit']})", fontsize=10)
    save(fig, path, dpi=110)


def _cap(x: float | None, slo: float) -> float:
    return 20.0 * slo if x is None or math.isinf(x) else min(x, 20.0 * slo)
