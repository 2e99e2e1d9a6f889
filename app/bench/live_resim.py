"""Phase 4 of the live benchmark again on a finished run, without the live server: the run's
JSON (`settings.resim`, e.g. docs/data_live.json) and its per-run records (`settings.records`).
The run's own job size, seed, trace and adaptive policy are taken from its JSON."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from app.bench import live as lb
from app.bench.live_report import checks
from app.bench.live_settings import LiveBenchSettings, bench_configs, spec_2x
from app.bench.live_sim import RecordedRun, SimPhaseInputs, simulate_runs
from app.sim.replica.request_metrics import LoadSummary, RequestRecord
from app.sim.traces.spec import TraceSpec


def read_records(records_dir: Path) -> dict[str, RecordedRun]:
    """The per-run files a live run wrote (`<run>.json`, loadgen's `LoadResult.to_dict`)."""
    runs = {}
    for f in sorted(records_dir.glob("*.json")):
        d = json.loads(f.read_text())
        runs[f.stem] = RecordedRun([RequestRecord(**r) for r in d["records"]], d["timeseries"])
    return runs


def _summaries(runs: dict[str, Any]) -> dict[str, LoadSummary]:
    names = {f.name for f in fields(LoadSummary)}
    return {n: LoadSummary(**{k: v for k, v in r.items() if k in names})
            for n, r in runs.items()}


def resim(settings: LiveBenchSettings, run_json: Path) -> dict[str, Any]:
    """The finished run's JSON with its simulator phase and checks redone."""
    out: dict[str, Any] = json.loads(run_json.read_text())
    policy = next(n[:-3] for n in out["runs"] if n.endswith("_2x") and n != "static_2x")
    a = replace(settings, job_size=out["job_size"], seed=out["seed"], trace=out["trace"],
                policy=policy)
    out["runs"] = _summaries(out["runs"])
    configs = bench_configs(a, lb.serve_args(a.config), out["k"], out["slo_ms"])
    spec_1x = TraceSpec(**out["spec_1x"]) if "spec_1x" in out else None
    inputs = SimPhaseInputs(read_records(a.records), out["capacity"]["ramp"],
                            spec_2x(a, out["capacity"]["live_qps"]), spec_1x, configs,
                            out["k"], out["slo_ms"])
    sim = simulate_runs(a, inputs)
    out["sim_inputs"], out["sim"] = sim.inputs, sim.summaries
    out["checks"] = checks(out, a.policy)
    return out
