"""Phase 4 of the live benchmark again on a finished run, without the live server: the run's
JSON (`settings.resim`, e.g. docs/data_live.json) and its per-run records (`settings.records`).
The run's own family, job size, seed, trace, 2x duration, adaptive policy, static
configurations, accuracy floor and utilities are taken from its JSON."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from app.sim.replica.request_metrics import LoadSummary, RequestRecord
from bench.experiments.adaptive_vs_static.knobs import knobs_of
from bench.experiments.adaptive_vs_static.report import checks
from bench.experiments.adaptive_vs_static.settings import LiveBenchSettings
from bench.experiments.fidelity.classify.live_runs import RecordedRun, phase_inputs, simulate_runs
from bench.experiments.fidelity.compare import Comparison

TOLERANCE_PTS = 2.0


def read_records(records_dir: Path) -> dict[str, RecordedRun]:
    """The per-run files a live run wrote (`<run>.json`, loadgen's `LoadResult.to_dict`)."""
    runs = {}
    for f in sorted(records_dir.glob("*.json")):
        d = json.loads(f.read_text())
        runs[f.stem] = RecordedRun([RequestRecord(**r) for r in d["records"]], d["timeseries"],
                                   float(d.get("wall_s") or 0.0))
    return runs


def _summaries(runs: dict[str, Any]) -> dict[str, LoadSummary]:
    names = {f.name for f in fields(LoadSummary)}
    return {n: LoadSummary(**{k: v for k, v in r.items() if k in names})
            for n, r in runs.items()}


def resim(settings: LiveBenchSettings, run_json: Path) -> dict[str, Any]:
    """The finished run's JSON with its simulator phase, checks and knobs redone."""
    from bench.core.result import read_result

    out: dict[str, Any] = read_result(run_json)["data"]  # a Result, or a bare record from before
    policy = out.get("policy") or next(n[:-3] for n in out["runs"] if n.endswith("_2x")
                                       and not n.startswith("static_"))
    a = replace(settings, family=out.get("family", settings.family), job_size=out["job_size"],
                seed=out["seed"], trace=out["trace"], policy=policy,
                duration_s=out["runs"]["static_2x"]["duration_s"], min_accuracy=out.get("min_accuracy"),
                warmup_s=(out["runs"].get("warmup_adaptive") or {}).get("duration_s",
                                                                       settings.warmup_s),
                utilities=tuple(out.get("utilities") or ()))
    out["runs"] = _summaries(out["runs"])
    runs = read_records(a.records)
    sim = simulate_runs(a, phase_inputs(a, out, runs))
    out["sim_inputs"], out["sim"] = sim.inputs, sim.summaries
    out["sim_item_accuracy"] = sim.item_accuracy
    out["checks"] = checks(out, a.policy)
    out["knobs"] = knobs_of(a, out, {n: r.records for n, r in runs.items()}, sim.knobs)
    return out


def comparisons(out: dict[str, Any]) -> list[Comparison]:
    """Each simulated run's accuracy and violations beside the live run's, within 2 points."""
    rows = []
    for name, f in out["checks"]["fidelity"].items():
        rows += [Comparison("classify", name, "accuracy %", 100.0 * f["accuracy_live"],
                            100.0 * f["accuracy_sim"], TOLERANCE_PTS),
                 Comparison("classify", name, "violations %", 100.0 * f["violation_live"],
                            100.0 * f["violation_sim"], TOLERANCE_PTS)]
    return rows


def main(argv: list[str]) -> int:
    """`python -m bench fidelity adaptive-vs-static RUN.json [adaptive-vs-static flags]`: the
    run's simulator phase redone from its records (`--records`, default the run's own), the
    Result to `--out` (default: RUN.json, rewritten)."""
    from bench.core.cli import settings_of
    from bench.core.result import Run
    from bench.core.run_report import clean
    from bench.experiments.adaptive_vs_static.cli import parse
    from bench.experiments.adaptive_vs_static.report import report
    from bench.experiments.fidelity.compare import checks as comparison_checks
    from bench.experiments.fidelity.compare import table

    if not argv or argv[0].startswith("-"):
        raise SystemExit("usage: python -m bench fidelity adaptive-vs-static RUN.json [flags "
                         "of python -m bench adaptive-vs-static: --records, --out, --png, ...]")
    run_json, rest = Path(argv[0]), argv[1:]
    flags = rest if "--out" in rest else [*rest, "--out", str(run_json)]
    settings = replace(parse(flags), resim=run_json)
    run = Run()
    out = resim(settings, run_json)
    rows = comparisons(out)
    print(report(out) + "\n\n" + table(rows))
    return run.finish(settings.out, clean(out), settings=settings_of(settings),
                      checks=comparison_checks(rows))
