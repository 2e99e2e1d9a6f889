"""Checks, table and plot of the single-request benchmark (bench/experiments/single_request/run.py) against the
issue's targets: at 1x, 2x, 3x capacity >= 95% of admitted within the SLO, goodput at 3x
>= 90% of goodput at 1x, refusals answered in < 20 ms p99 at the client, client-vs-server
attainment gap <= 2 points; capacity of the app against the FastAPI + torch floor and against
an earlier run of the app (`--baseline`). Pure apart from writing the PNG."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.experiments.single_request.metrics import Capacity, FrontRun
from bench.experiments.single_request.path_cpu import PATH_TARGET, path_lines

TARGETS = {"attainment_admitted_min": 0.95, "goodput_3x_over_1x": 0.9,
           "refusal_p99_ms": 20.0, "gap_pts": 2.0, "app_over_baseline": 2.0}


def _qps(cap: Capacity | dict[str, Any] | None) -> float | None:
    """A capacity's goodput, from the object or its saved JSON form (a baseline)."""
    if cap is None:
        return None
    return float(cap["qps"]) if isinstance(cap, dict) else cap.qps


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def _against_floor(out: dict[str, Any]) -> dict[str, Any]:
    """Correct answers within the SLO per second, the app over the FastAPI + torch floor, each
    at the same multiple of the floor's capacity (None: not run)."""
    floor = {r.name.removeprefix("torch_"): r for r in out.get("torch", {}).get("runs", [])}
    app = {r.name.removeprefix("app_at_torch_"): r for r in out.get("app_at_torch", [])}
    ratios = {m: _ratio(app[m].correct_qps, floor[m].correct_qps)
              for m in sorted(floor.keys() & app.keys())}
    found = [v for v in ratios.values() if v is not None]
    return {"correct_over_torch": ratios, "correct_over_torch_min": min(found) if found else None}


def checks(out: dict[str, Any]) -> dict[str, Any]:
    """The figures the issue names, and whether each meets its target (None: not measurable
    in this run, e.g. no refusals to time, no capacity found, no baseline given)."""
    runs: list[FrontRun] = out["app"]["runs"]
    by_name = {r.name: r for r in runs}
    app_qps = _qps(out["app"]["capacity"])
    torch_qps = _qps(out["torch"]["capacity"]) if "torch" in out else None
    one, three = by_name.get("app_1x"), by_name.get("app_3x")
    att = _finite([r.attainment_admitted for r in runs])
    refusal = _finite([r.refusal_p99_ms for r in runs if r.refused])
    door = _finite([r.door_refusal_p99_ms for r in runs if r.door_refused])
    gaps = _finite([abs(r.gap_pts) for r in runs])
    res: dict[str, Any] = {
        "capacity_app_qps": app_qps, "capacity_torch_qps": torch_qps,
        "capacity_baseline_qps": _qps(out.get("baseline")),
        "app_over_torch": _ratio(app_qps, torch_qps),
        "app_over_baseline": _ratio(app_qps, _qps(out.get("baseline"))),
        "attainment_admitted_min": min(att) if att else None,
        "goodput_3x_over_1x": (_ratio(three.goodput_qps, one.goodput_qps)
                               if one is not None and three is not None else None),
        "refusal_p99_ms_max": max(refusal) if refusal else None,
        # the front door's own refusals only (the rest are the ingress's late, second-line ones)
        "front_door_refusal_p99_ms_max": max(door) if door else None,
        "gap_pts_max_abs": max(gaps) if gaps else None,
        **_against_floor(out),
        "capacity_serve_floor_qps": _qps(out.get("serve_floor", {}).get("capacity")),
        "path_over_serve_floor": out.get("path_cpu", {}).get("path_over_serve_floor"),
    }

    def at_least(key: str, target: float) -> bool | None:
        return None if res[key] is None else bool(res[key] >= target)

    def at_most(key: str, target: float) -> bool | None:
        return None if res[key] is None else bool(res[key] <= target)

    res["pass"] = {
        "attainment_admitted>=95%": at_least("attainment_admitted_min",
                                             TARGETS["attainment_admitted_min"]),
        "goodput_3x>=0.9x1x": at_least("goodput_3x_over_1x", TARGETS["goodput_3x_over_1x"]),
        "refusal_p99<20ms": (None if res["refusal_p99_ms_max"] is None
                             else bool(res["refusal_p99_ms_max"] < TARGETS["refusal_p99_ms"])),
        "gap<=2pts": at_most("gap_pts_max_abs", TARGETS["gap_pts"]),
        "capacity>=2x_baseline": at_least("app_over_baseline", TARGETS["app_over_baseline"]),
        "correct_vs_torch>=1.5": at_least("correct_over_torch_min", 1.5),
    }
    if res["path_over_serve_floor"] is not None:  # only with --serve-floor
        res["pass"]["path<=1.25x_serve_floor"] = at_most("path_over_serve_floor", PATH_TARGET)
    return res


def _all_runs(out: dict[str, Any]) -> list[FrontRun]:
    torch_steps: list[FrontRun] = (
        [*out["torch"]["ramp"], *out["torch"].get("runs", [])] if "torch" in out else [])
    floor = out.get("serve_floor", {})
    return [*out["app"]["ramp"], *out["app"]["runs"], *floor.get("ramp", []),
            *floor.get("runs", []), *torch_steps, *out.get("app_at_torch", [])]


HEAD = (f"{'run':<17}{'offered':>8}{'sent':>7}{'ans':>7}{'ok':>7}{'refused':>8}{'dl_exc':>7}"
        f"{'shed':>6}{'err':>6}{'att%':>7}{'att_adm%':>9}{'goodput':>9}{'p50':>7}{'p99':>7}"
        f"{'ref_p99':>8}{'srv_adm%':>9}{'gap':>7}{'door':>7}{'door_p99':>9}{'ing_p99':>8}"
        f"{'corr/s':>8}")


def table(runs: Sequence[FrontRun]) -> str:
    """One line per run (counts are requests; latencies ms at the client; gap: server minus
    client attainment of admitted, points; corr/s: correct answers within the SLO per s)."""
    lines = [HEAD]
    for r in runs:
        lines.append(
            f"{r.name:<17}{r.offered_qps:>8.1f}{r.sent:>7}{r.answered:>7}{r.ok:>7}"
            f"{r.refused:>8}{r.deadline_exceeded:>7}{r.shed:>6}{r.errors:>6}"
            f"{100 * r.attainment:>7.1f}{100 * r.attainment_admitted:>9.1f}"
            f"{r.goodput_qps:>9.1f}{r.p50_ms:>7.0f}{r.p99_ms:>7.0f}{r.refusal_p99_ms:>8.1f}"
            f"{100 * r.server_attainment_admitted:>9.1f}{r.gap_pts:>7.1f}"
            f"{r.door_refused:>7}{r.door_refusal_p99_ms:>9.1f}{r.ingress_refusal_p99_ms:>8.1f}"
            f"{r.correct_qps:>8.1f}")
    return "\n".join(lines)


def report(out: dict[str, Any]) -> str:
    c = out["checks"]

    def num(key: str, unit: str = "") -> str:
        return "-" if c[key] is None else f"{c[key]:.2f}{unit}"

    modified = out.get("modified") or []
    lines = [f"commit {out['commit']} ({len(modified)} tracked files modified: "
             f"{', '.join(modified) or '-'}); family {out['settings']['family']}, SLO "
             f"{out['settings']['slo_ms']:g} ms", table(_all_runs(out)), ""]
    lines.append(f"capacity (best goodput at >= 95% of sent within SLO): app "
                 f"{num('capacity_app_qps', ' req/s')}, FastAPI + torch "
                 f"{num('capacity_torch_qps', ' req/s')}, baseline "
                 f"{num('capacity_baseline_qps', ' req/s')}; app/torch "
                 f"{num('app_over_torch')}, app/baseline {num('app_over_baseline')}")
    lines.append(f"min attainment of admitted {num('attainment_admitted_min')}, goodput 3x/1x "
                 f"{num('goodput_3x_over_1x')}, refusal p99 {num('refusal_p99_ms_max', ' ms')}, "
                 f"max |gap| {num('gap_pts_max_abs', ' pts')}")
    if c.get("correct_over_torch"):
        lines.append("correct answers within the SLO per second, app / FastAPI + torch, at the "
                     "floor's capacity x " + ", ".join(
                         f"{m}: {'-' if v is None else f'{v:.2f}'}"
                         for m, v in c["correct_over_torch"].items()))
    if out.get("path_cpu", {}).get("runs"):
        lines.append(f"Serve's no-model floor: capacity {num('capacity_serve_floor_qps', ' req/s')}")
        lines.extend(path_lines(out["path_cpu"]))
    lines.append("pass: " + ", ".join(f"{k} {v}" for k, v in c["pass"].items()))
    return "\n".join(lines)


def plot(out: dict[str, Any], path: Path) -> None:
    """Goodput and attainment (of sent, of admitted) against offered load, per server."""
    from bench.core.plot import pyplot, save

    plt = pyplot()

    groups = {"app ramp": out["app"]["ramp"], "app 1x-3x": out["app"]["runs"]}
    if "torch" in out:
        groups["FastAPI + torch ramp"] = out["torch"]["ramp"]
    if "serve_floor" in out:
        groups["Serve floor ramp"] = out["serve_floor"]["ramp"]
    fig, (ax_g, ax_a) = plt.subplots(1, 2, figsize=(11, 4.2))
    top = max((r.offered_qps for g in groups.values() for r in g), default=1.0)
    ax_g.plot([0, top], [0, top], color="0.8", lw=0.8, label="goodput = offered")
    for (name, runs), color in zip(groups.items(), ("tab:blue", "tab:orange", "tab:green", "tab:grey"),
                                   strict=False):
        x = [r.offered_qps for r in runs]
        ax_g.plot(x, [r.goodput_qps for r in runs], "o-", color=color, label=name)
        ax_a.plot(x, [100 * r.attainment for r in runs], "o-", color=color,
                  label=f"{name}, of sent")
        ax_a.plot(x, [100 * r.attainment_admitted for r in runs], "x--", color=color,
                  label=f"{name}, of admitted")
    ax_a.axhline(95, color="red", lw=0.8, label="95%")
    ax_g.set(xlabel="offered (requests/s)", ylabel="goodput (ok within SLO /s)")
    ax_a.set(xlabel="offered (requests/s)", ylabel="within SLO (%)", ylim=(0, 105))
    ax_g.legend(fontsize=7)
    ax_a.legend(fontsize=7)
    fig.suptitle(f"single /v1/classify requests, {out['settings']['family']}, SLO "
                 f"{out['settings']['slo_ms']:g} ms ({out['commit']})", fontsize=10)
    save(fig, path, dpi=100)
