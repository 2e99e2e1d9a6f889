"""The simulator against the live server for the three knobs: model
selection (RAMSIS, `family`), token adaptation (OTAS, `vit`) and modality selection (MOSEL,
`fusion`), single requests at 1x and 2x the best static configuration's live capacity, on two
machine states (quiet; one busy-loop neighbour). Each cell is one `python -m bench adaptive-vs-static` run
(its live phases and its simulator phase, bench/experiments/fidelity/classify/live_runs.py); this module gives the runs'
commands and turns their JSON into the figure: accuracy (of the items answered within the SLO)
and violations (every request not answered ok within the SLO, refusals included) live vs the
`simfront` simulator, which predicts them from the static configuration's ramp alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.core.result import read_result
from bench.experiments.fidelity.compare import Comparison

KNOBS: dict[str, list[str]] = {  # knob -> bench_live arguments (single requests)
    "ramsis": ["--family", "family", "--policy", "ramsis"],
    "otas": ["--family", "vit", "--policy", "otas", "--utilities", "table2"],
    # 0.70: two modality subsets besides all modalities qualify, so MOSEL has a choice
    "mosel": ["--family", "fusion", "--policy", "mosel", "--min-accuracy", "0.70"],
}
RAMP_START = {"quiet": {"ramsis": 60, "otas": 60, "mosel": 60},
              "busy": {"ramsis": 30, "otas": 30, "mosel": 30}}  # requests/s, below the knee
STATES = {"quiet": [], "busy": ["--busy-neighbours", "1"]}
COMMON = ["--ramp-factor", "1.2", "--ramp-steps", "9", "--ramp-s", "6", "--duration-s", "30",
          "--warmup-s", "10", "--settle-s", "5", "--light-s", "10"]
SOURCE = "simfront"
TOLERANCE_PTS = 2.0
SAME_VARIANT = 0.95  # an adaptive run this much on the static's variant served the same thing


def bench_args(knob: str, state: str, runs_dir: Path) -> list[str]:
    """python -m bench adaptive-vs-static's arguments for one cell; its JSON and records under `runs_dir`."""
    if knob not in KNOBS or state not in STATES:
        raise ValueError(f"unknown cell {knob!r}/{state!r}; knobs {sorted(KNOBS)}, "
                         f"states {sorted(STATES)}")
    name = runs_dir / f"{knob}_{state}"
    return [*KNOBS[knob], "--ramp-start", str(RAMP_START[state][knob]), *COMMON,
            *STATES[state], "--records", str(name), "--out", f"{name}.json",
            "--png", f"{name}.png"]


@dataclass(frozen=True)
class Row:
    knob: str
    state: str
    load: str  # "1x" | "2x"
    offered_qps: float
    neighbour_cores: float  # measured during the run (the machine less the stack)
    accuracy_live: float
    accuracy_sim: float
    violation_live: float  # %, refusals included
    violation_sim: float
    # 2x rows: the static configuration's live run at the same load, and the share of the
    # adaptive run's items on the static's variant; where that is ~all, the two live runs
    # served the same thing minutes apart: their gap is the live figure's own repeatability
    static_violation_live: float | None = None
    same_variant_share: float | None = None

    @property
    def accuracy_diff_pts(self) -> float:
        return 100.0 * (self.accuracy_sim - self.accuracy_live)

    @property
    def violation_diff_pts(self) -> float:
        return self.violation_sim - self.violation_live

    @property
    def within(self) -> bool:
        return (abs(self.accuracy_diff_pts) <= TOLERANCE_PTS
                and abs(self.violation_diff_pts) <= TOLERANCE_PTS)

    @property
    def repeat_gap_pts(self) -> float | None:
        """|static - adaptive| live violations where both served the same variant (>= 95 %)."""
        if (self.static_violation_live is None or self.same_variant_share is None
                or self.same_variant_share < SAME_VARIANT):
            return None
        return abs(self.static_violation_live - self.violation_live)

    def comparisons(self) -> list[Comparison]:
        """The cell's two figures, live vs the simulator, each within 2 points."""
        case = f"{self.knob}/{self.state}/{self.load}"
        return [Comparison("classify", case, "accuracy %", 100.0 * self.accuracy_live,
                           100.0 * self.accuracy_sim, TOLERANCE_PTS),
                Comparison("classify", case, "violations %", self.violation_live,
                           self.violation_sim, TOLERANCE_PTS)]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "accuracy_diff_pts": self.accuracy_diff_pts,
                "violation_diff_pts": self.violation_diff_pts, "within_2pts": self.within,
                "repeat_gap_pts": self.repeat_gap_pts}


def rows_of(knob: str, state: str, out: Mapping[str, Any]) -> list[Row]:
    """The cell's two rows from a bench_live JSON (its `checks.fidelity`)."""
    policy, fid = out["policy"], out["checks"]["fidelity"]
    front = (out.get("sim_inputs") or {}).get(SOURCE) or {}
    rows = []
    for load in ("1x", "2x"):
        run = f"{policy}_{load}"
        f = fid.get(f"{SOURCE}_{run}")
        if f is None:
            raise ValueError(f"{knob}/{state}: no {SOURCE} prediction of {run} in the JSON")
        static, same = None, None
        if load == "2x" and "static_2x" in out["runs"]:
            st = out["runs"]["static_2x"]
            static = 100.0 * (1.0 - st["slo_attainment"])
            variant = max(st["variant_share"], key=st["variant_share"].get, default=None)
            same = out["runs"][run]["variant_share"].get(variant, 0.0) if variant else None
        rows.append(Row(knob, state, load, float(out["runs"][run]["offered_qps"]),
                        float(front.get("neighbour_cores", {}).get(run, float("nan"))),
                        f["accuracy_live"], f["accuracy_sim"], 100.0 * f["violation_live"],
                        100.0 * f["violation_sim"], static, same))
    return rows


def table(rows: Sequence[Row]) -> str:
    head = (f"{'knob':<7}{'machine':<8}{'load':<5}{'req/s':>7}{'nbr cores':>10}"
            f"{'acc live':>9}{'acc sim':>8}{'d pts':>7}{'viol live %':>12}{'viol sim %':>11}"
            f"{'d pts':>7}  within 2  {'live repeat gap':>15}")
    lines = [head]
    for r in rows:
        lines.append(f"{r.knob:<7}{r.state:<8}{r.load:<5}{r.offered_qps:>7.1f}"
                     f"{r.neighbour_cores:>10.2f}{r.accuracy_live:>9.3f}{r.accuracy_sim:>8.3f}"
                     f"{r.accuracy_diff_pts:>+7.2f}{r.violation_live:>12.1f}"
                     f"{r.violation_sim:>11.1f}{r.violation_diff_pts:>+7.2f}  "
                     f"{'yes' if r.within else 'NO':<8}  " + _gap(r))
    met = sum(r.within for r in rows)
    lines.append(f"within {TOLERANCE_PTS:g} points on both: {met} of {len(rows)}")
    gaps = [g for r in rows if (g := r.repeat_gap_pts) is not None]
    if gaps:
        lines.append(f"live repeat gap (static and adaptive 2x runs serving the same variant, "
                     f"minutes apart): {min(gaps):.1f}-{max(gaps):.1f} points of violations")
    return "\n".join(lines)


def _gap(r: Row) -> str:
    g = r.repeat_gap_pts
    if g is None:
        return f"{'-':>15}"
    return f"{g:>9.1f} (static {r.static_violation_live:.1f})"


def summary(rows: Sequence[Row], sources: Mapping[str, str]) -> dict[str, Any]:
    return {"source": SOURCE, "tolerance_pts": TOLERANCE_PTS, "runs": dict(sources),
            "rows": [r.to_dict() for r in rows],
            "within": sum(r.within for r in rows), "cells": len(rows),
            "max_abs_accuracy_diff_pts": max(abs(r.accuracy_diff_pts) for r in rows),
            "max_abs_violation_diff_pts": max(abs(r.violation_diff_pts) for r in rows),
            "live_repeat_gaps_pts": [g for r in rows if (g := r.repeat_gap_pts) is not None]}


def plot(rows: Sequence[Row], png: Path) -> None:
    from bench.core.plot import pyplot, save

    plt = pyplot()

    labels = [f"{r.knob}\n{r.state} {r.load}" for r in rows]
    x = range(len(rows))
    fig, axes = plt.subplots(2, 1, figsize=(max(8, len(rows) * 0.9), 7), sharex=True)
    for ax, live, sim, what in (
            (axes[0], [r.violation_live for r in rows], [r.violation_sim for r in rows],
             "violations % (refusals included)"),
            (axes[1], [100 * r.accuracy_live for r in rows], [100 * r.accuracy_sim for r in rows],
             "accuracy % of items in time")):
        ax.bar([i - 0.2 for i in x], live, 0.4, label="live")
        ax.bar([i + 0.2 for i in x], sim, 0.4, label=f"simulated ({SOURCE})")
        ax.set_ylabel(what)
        ax.legend(loc="upper left")
    axes[1].set_ylim(min(60.0, *[100 * r.accuracy_live for r in rows]) - 5, 100)
    axes[1].set_xticks(list(x), labels, fontsize=8)
    fig.suptitle("simulator vs live, three knobs, single requests, 1x and 2x capacity, "
                 "quiet and busy machine")
    save(fig, png, dpi=110)


def repeat_table(first: Sequence[Row], again: Sequence[Row]) -> tuple[str, list[dict[str, Any]]]:
    """The same cells measured twice (a second `measure` into another directory): how far the
    live figure moves between two runs of the same command, against the 2-point tolerance."""
    by_cell = {(r.knob, r.state, r.load): r for r in first}
    out = []
    lines = [f"{'knob':<7}{'machine':<8}{'load':<5}{'viol live %':>12}{'again %':>9}{'gap':>7}"
             f"{'acc live':>9}{'again':>7}{'gap':>7}"]
    for b in again:
        a = by_cell.get((b.knob, b.state, b.load))
        if a is None:
            continue
        gap_v = b.violation_live - a.violation_live
        gap_a = 100.0 * (b.accuracy_live - a.accuracy_live)
        out.append({"knob": b.knob, "state": b.state, "load": b.load,
                     "violation_live": a.violation_live, "violation_again": b.violation_live,
                     "violation_gap_pts": gap_v, "accuracy_gap_pts": gap_a})
        lines.append(f"{b.knob:<7}{b.state:<8}{b.load:<5}{a.violation_live:>12.1f}"
                     f"{b.violation_live:>9.1f}{gap_v:>+7.2f}{a.accuracy_live:>9.3f}"
                     f"{b.accuracy_live:>7.3f}{gap_a:>+7.2f}")
    return "\n".join(lines), out


def read_cells(runs_dir: Path, knobs: Sequence[str], states: Sequence[str]
               ) -> tuple[list[Row], dict[str, str]]:
    """Every cell's rows from `<runs_dir>/<knob>_<state>.json` (cells not run: skipped)."""
    rows, sources = [], {}
    for state in states:
        for knob in knobs:
            path = runs_dir / f"{knob}_{state}.json"
            if not path.exists():
                continue
            rows += rows_of(knob, state, read_result(path)["data"])  # Result or bare record
            sources[f"{knob}_{state}"] = str(path)
    if not rows:
        raise ValueError(f"no runs under {runs_dir} (expected <knob>_<state>.json)")
    return rows, sources
