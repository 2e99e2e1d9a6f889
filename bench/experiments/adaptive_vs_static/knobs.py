"""The knobs' figures of the live benchmark (pure: records and metrics in, JSON and text out):
per compared run, goodput, attainment, OTAS's utility and MOSEL's goodput at the accuracy SLO
(bench/experiments/adaptive_vs_static/knob_metrics.py), live and as the simulator predicted the same run; the adaptive
policy's ratios over the best static configuration, and its utility over every static one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.sim.replica.request_metrics import RequestRecord
from bench.experiments.adaptive_vs_static.knob_metrics import (
    KnobMetrics,
    knob_metrics,
    knob_ratios,
    ratio,
)

if TYPE_CHECKING:
    from bench.experiments.adaptive_vs_static.settings import LiveBenchSettings

BEST = "static_2x"


def compared_runs(policy: str, statics: Mapping[str, Any] | None,
                  present: Sequence[str]) -> list[str]:
    """The 2x runs of the static configurations (the best first), then the adaptive runs."""
    others = [f"static_{c['label']}_2x" for c in (statics or {}).get("configs", [])
              if c["label"] != (statics or {}).get("best")]
    wanted = [BEST, *others, f"{policy}_1x", f"{policy}_2x"]
    return [n for n in wanted if n in present]


def knobs_of(settings: LiveBenchSettings, out: Mapping[str, Any],
             records: Mapping[str, Sequence[RequestRecord]],
             sim: Mapping[str, KnobMetrics]) -> dict[str, Any]:
    """The section for a finished run: `out` (its JSON: runs' summaries, SLO, statics), its
    records by run, and the simulator's metrics by "<kind>_<run>"."""
    a = settings
    names = compared_runs(a.policy, out.get("statics"), list(records))
    live = {n: knob_metrics(records[n], out["runs"][n].duration_s, out["slo_ms"], a.job_size,
                            a.min_accuracy, a.utilities) for n in names}
    return knobs_section(live, sim, a.policy, out.get("statics"))


def knobs_section(live: Mapping[str, KnobMetrics], sim: Mapping[str, KnobMetrics],
                  policy: str, statics: Mapping[str, Any] | None) -> dict[str, Any]:
    """docs/data_live.json "knobs": metrics per run and source, and the ratios."""
    names = compared_runs(policy, statics, list(live))
    kinds = sorted({key.split("_", 1)[0] for key in sim})  # sim, simcal (live_sim.py)
    sources: dict[str, Mapping[str, KnobMetrics]] = {"live": live}
    sources.update({kind: {n: sim[f"{kind}_{n}"] for n in names if f"{kind}_{n}" in sim}
                    for kind in kinds})
    out: dict[str, Any] = {"best_static": (statics or {}).get("best", "most_accurate"),
                           "runs": names, "sources": list(sources), "ratios": {},
                           "utility_over_statics": {}}
    adaptive = f"{policy}_2x"
    for src, ms in sources.items():
        out[src] = {n: ms[n].to_dict() for n in names if n in ms}
        if adaptive in ms and BEST in ms:
            out["ratios"][src] = knob_ratios(ms[adaptive], ms[BEST])
            out["utility_over_statics"][src] = {
                n: ratio(ms[adaptive].utility_qps, ms[n].utility_qps)
                for n in names if n.startswith("static") and n in ms}
    return out


UTILITY_TARGET = 1.10  # OTAS: utility at 2x >= 1.10x the best fixed gamma's


def utility_checks(section: Mapping[str, Any]) -> dict[str, Any]:
    """The adaptive run's utility over the best static configuration's at 2x (the least of
    its ratios over every static), live ("utility_over_best_static", judged) and per
    simulator kind ("<kind>_utility_over_best_static"); empty without two statics' runs."""
    res: dict[str, Any] = {}
    for src, per in section.get("utility_over_statics", {}).items():
        found = [v for v in per.values() if v is not None]
        if found:
            key = "utility_over_best_static" if src == "live" else f"{src}_utility_over_best_static"
            res[key] = min(found)
    if "utility_over_best_static" in res:
        res["pass"] = {"utility>=1.1x_best_static":
                       res["utility_over_best_static"] >= UTILITY_TARGET}
    return res


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def knobs_report(section: Mapping[str, Any], labels: Mapping[str, str]) -> str:
    """The table: one line per run and source; then the ratios. `labels`: 2x run -> static
    configuration label."""
    lines = [f"{'knobs: run':<30}{'source':>8}{'goodput/s':>11}{'att%':>7}"
             f"{'utility/s':>11}{'acc_goodput/s':>15}{'acc_att%':>10}"]
    for name in section["runs"]:
        shown = name if name not in labels else (
            f"{labels[name]} (best static)" if name == BEST else f"{labels[name]} (static)")
        for src in section["sources"]:
            m = section.get(src, {}).get(name)
            if m is not None:
                lines.append(f"{shown[:30]:<30}{src:>8}{m['goodput_qps']:>11.1f}"
                             f"{100 * m['attainment']:>7.1f}{m['utility_qps']:>11.1f}"
                             f"{m['accuracy_goodput_qps']:>15.1f}"
                             f"{100 * m['accuracy_attainment']:>10.1f}")
                shown = ""
    lines.append(f"adaptive / best static ({section['best_static']}) at 2x:")
    for src, r in section["ratios"].items():
        lines.append(f"  {src:<7} goodput x{_fmt(r['goodput'])}, utility x{_fmt(r['utility'])}, "
                     f"goodput at the accuracy SLO x{_fmt(r['accuracy_goodput'])}")
    for src, per in section["utility_over_statics"].items():
        if len(per) > 1:
            lines.append(f"  {src:<7} utility over each static: " + ", ".join(
                f"{labels.get(n, n)} x{_fmt(v)}" for n, v in per.items()))
    return "\n".join(lines)


def static_labels(statics: Mapping[str, Any] | None) -> dict[str, str]:
    """2x run name -> the label of the static configuration it ran."""
    if not statics:
        return {BEST: "most_accurate"}
    return {(BEST if c["label"] == statics["best"] else f"static_{c['label']}_2x"): c["label"]
            for c in statics["configs"]}


def plot_knobs(section: Mapping[str, Any], labels: Mapping[str, str], path: Path,
               title: str = "") -> None:
    """Bars per run (live and each simulator kind): goodput, utility and goodput at the
    accuracy SLO, per second."""
    from bench.core.plot import pyplot, save

    plt = pyplot()

    figures = (("goodput_qps", "goodput (items/s)"), ("utility_qps", "utility / s"),
               ("accuracy_goodput_qps", "goodput at the accuracy SLO (items/s)"))
    names, sources = section["runs"], section["sources"]
    fig, axes = plt.subplots(1, len(figures), figsize=(5.5 * len(figures), 4.2), squeeze=False)
    width = 0.8 / len(sources)
    for ax, (key, ylabel) in zip(axes[0], figures, strict=True):
        for j, src in enumerate(sources):
            vals = [section.get(src, {}).get(n, {}).get(key, 0.0) for n in names]
            ax.bar([i + j * width for i in range(len(names))], vals, width, label=src)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
        ax.set_xticklabels([labels.get(n, n) for n in names], rotation=45, ha="right",
                           fontsize=8)
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=7)
    save(fig, path, title=title, dpi=100)
