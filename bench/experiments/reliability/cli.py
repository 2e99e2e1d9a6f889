"""Reliability under malformed and hostile clients, kills and a soak, under load (table + a
Result; docs/data_reliability.json with --docs, or docs/data_reliability_soak.json for a soak-only
run).

    RAY_AUTH_MODE=disabled .venv/bin/python -m bench reliability [--docs]   # ~4 min
    RAY_AUTH_MODE=disabled .venv/bin/python -m bench reliability --phases soak --docs

On a private local Ray Serve (HTTP port --port): single /v1/classify requests (Poisson,
--single-qps each) to every family of --families in every phase, and the RSS of the Serve
proxy, ingress and classifiers sampled throughout. Phases (--phases): quiet (the baseline);
slowloris (--slow-clients connections announcing a --slow-length body and sending a byte a
second: 408 expected after the edge's body read timeout); slow_headers (--slow-header-clients
connections sending headers a byte a second, never finishing them, for --slow-header-s);
chunked (a --chunked-mb MB chunked body to /v1/jobs: 413 expected, early); malformed (~70 bad
requests: no 5xx, a JSON error each); kill_classifier (a --kill-family classifier replica
killed by pid --kill-at-s into a --kill-s load: every request answered once, fast 503s, time
to recover); kill_controller (the controller's process, the same way); soak (only when asked:
--soak or --phases soak; --soak-s at --soak-load x the capacity in --front-figures, or
--soak-qps, to that benchmark's family: every request answered, RSS growth < 5%).
Targets: other traffic within 5 points of quiet attainment, proxy/ingress RSS within 10%; each
row of the table is one check (row, measured, target, pass).
The run is bench/experiments/reliability/run.py; the figures bench/experiments/reliability/report.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.core.cli import experiment_parser, log_progress
from bench.experiments.reliability.settings import (
    ALL_PHASES,
    FRONT_FIGURES,
    NEEDS_QUIET,
    PHASES,
    ReliabilitySettings,
)

SOAK_DOCS = Path("docs/data_reliability_soak.json")


def parse(argv: list[str] | None = None) -> tuple[ReliabilitySettings, Path, Path, Path | None]:
    p = experiment_parser(__doc__, out="results/reliability/reliability.json", seed=0,
                          port=8140, config="serve_config.yaml")
    p.add_argument("--families", nargs="+", default=["vit", "fusion", "family"])
    p.add_argument("--single-qps", type=float, default=10.0, help="per family, requests/s")
    p.add_argument("--phases", nargs="+", default=list(PHASES), choices=ALL_PHASES)
    p.add_argument("--soak", action="store_true", help="add the soak to --phases")
    p.add_argument("--warmup-s", type=float, default=5.0)
    p.add_argument("--phase-s", type=float, default=15.0)
    p.add_argument("--slow-clients", type=int, default=1000)
    p.add_argument("--slow-length", type=int, default=10_000)
    p.add_argument("--slow-period-s", type=float, default=1.0)
    p.add_argument("--slow-header-clients", type=int, default=1000)
    p.add_argument("--slow-header-s", type=float, default=30.0)
    p.add_argument("--chunked-mb", type=float, default=400.0)
    p.add_argument("--kill-s", type=float, default=35.0, help="each kill phase's load")
    p.add_argument("--kill-at-s", type=float, default=3.0)
    p.add_argument("--kill-family", default="vit")
    p.add_argument("--recover-wait-s", type=float, default=120.0)
    p.add_argument("--soak-s", type=float, default=600.0)
    p.add_argument("--soak-qps", type=float, default=None,
                   help="default: --soak-load x the capacity in --front-figures")
    p.add_argument("--soak-load", type=float, default=0.8)
    p.add_argument("--soak-family", default=None, help="default: --front-figures's family")
    p.add_argument("--soak-warmup-s", type=float, default=60.0)
    p.add_argument("--soak-window-s", type=float, default=60.0)
    p.add_argument("--front-figures", type=Path, default=FRONT_FIGURES)
    p.add_argument("--num-cpus", type=int, default=8, help="Ray logical CPUs")
    p.add_argument("--settle-s", type=float, default=5.0)
    p.add_argument("--records", type=Path, default=None,
                   help="every request's record, the slow clients' answers, the RSS samples "
                   "(default results/reliability/records.json, soak_records.json for a soak)")
    p.add_argument("--from-records", type=Path, default=None,
                   help="no run: the figures and table again from a run's --records file")
    p.add_argument("--docs", action="store_true",
                   help="write docs/data_reliability.json (a soak-only run: "
                   f"{SOAK_DOCS}) instead")
    a = vars(p.parse_args(argv))
    out, docs, records, add_soak = a.pop("out"), a.pop("docs"), a.pop("records"), a.pop("soak")
    from_records = a.pop("from_records")
    phases = [x for x in ALL_PHASES if x in a["phases"] or (add_soak and x == "soak")]
    soak_only = phases == ["soak"]
    if docs:
        out = SOAK_DOCS if soak_only else Path("docs/data_reliability.json")
    if records is None:
        records = Path("results/reliability") / ("soak_records.json" if soak_only
                                                 else "records.json")
    if "quiet" not in phases and any(x in NEEDS_QUIET for x in phases):
        p.error(f"--phases {' '.join(x for x in phases if x in NEEDS_QUIET)} needs quiet "
                "(the baseline)")
    if "kill_classifier" in phases and a["kill_family"] not in a["families"]:
        p.error(f"--kill-family {a['kill_family']} is not one of --families {a['families']}")
    tuples = {"families": tuple(a["families"]), "phases": tuple(phases)}
    settings = ReliabilitySettings(**{**a, **tuples}, command=" ".join(
        ["python -m bench reliability", *(sys.argv[1:] if argv is None else argv)]))
    return settings, out, records, from_records


def main(argv: list[str] | None = None) -> int:
    settings, out_path, records, from_records = parse(argv)
    log_progress()
    from bench.core.cli import settings_of
    from bench.core.result import Check, Run, all_ok
    from bench.core.run_report import clean, write_json
    from bench.experiments.reliability.report import figures, table
    from bench.experiments.reliability.run import run_reliability

    run = Run()
    if from_records is not None:
        out, records = json.loads(from_records.read_text()), from_records
    else:
        out = run_reliability(settings)
        write_json(records, out)
    fig = figures(out)
    slim = {k: v for k, v in out.items()
            if k not in ("phases", "rss_samples", "loadavg_samples", "malformed")}
    slim["phases"] = [{k: v for k, v in p.items()
                       if k not in ("singles", "slow_clients", "slow_header_clients")}
                      for p in out["phases"]]
    slim["records"] = str(records)
    print(f"commit {slim['commit']} (modified: {', '.join(slim['modified']) or '-'}); "
          f"run {slim['wall_s']:.0f} s, loadavg {slim['loadavg_1min_after_run']:.1f}, "
          f"RLIMIT_NOFILE {slim['nofile']}")
    print("loadavg (1 min) per phase: " + ", ".join(
        f"{name} {f['loadavg_1min_mean']:.1f}" for name, f in fig["phases"].items()
        if f.get("loadavg_1min_mean") is not None))
    print(table(fig))
    extra = {} if from_records is None else {"figures_from_records": settings.command}
    checks = [Check(r["row"], r["measured"], r["target"], r["passed"]) for r in fig["rows"]]
    run.write(out_path, clean({**slim, **extra, "figures": fig}),
              settings={**settings_of(settings), "out": str(out_path),
                        "records": str(records)}, checks=checks)
    print(f"wrote {out_path}" + ("" if from_records is not None else f" and {records}"))
    return 0 if all_ok(checks) else 1
