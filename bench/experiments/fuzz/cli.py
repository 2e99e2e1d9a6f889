"""Fuzz the HTTP API with schemathesis against a real running server: no 5xx, every answer as
the OpenAPI declares (CI runs it).

    RAY_AUTH_MODE=disabled .venv/bin/python -m bench fuzz [--max-time-s 180]
    (or scripts/fuzz.sh, which bootstraps the venv first)

Starts a private local Ray Serve of the default app (--config) on --port (0: a free local port)
with an API key set, fuzzes every operation of its /openapi.json for --max-time-s seconds
(the checks: schemathesis.toml), shuts Ray down. Exit status 0 only when no check failed:
no 5xx, and every status code, content type, header and body as the OpenAPI declares.
Writes a Result (--out) and schemathesis' JUnit report beside it (junit.xml).
The run is bench/experiments/fuzz/run.py.
"""

from __future__ import annotations

from pathlib import Path

from bench.core.cli import experiment_parser, log_progress, settings_of
from bench.core.http import free_port
from bench.core.result import Run, all_ok, checks_from_flags
from bench.experiments.fuzz.run import FuzzSettings, run_fuzz


def parse(argv: list[str] | None = None) -> tuple[FuzzSettings, Path]:
    d = FuzzSettings()
    p = experiment_parser(__doc__, out=d.report_dir / "fuzz.json", seed=None, port=0,
                          config=d.config)
    p.add_argument("--max-time-s", type=int, default=d.max_time_s,
                   help="schemathesis' time budget, all phases")
    p.add_argument("--workers", type=int, default=d.workers)
    p.add_argument("--num-cpus", type=int, default=d.num_cpus, help="Ray logical CPUs")
    a = vars(p.parse_args(argv))
    out = a.pop("out")
    a["port"] = a["port"] or free_port()
    return FuzzSettings(**a, report_dir=out.parent), out


def main(argv: list[str] | None = None) -> int:
    settings, out = parse(argv)
    log_progress()
    run = Run()
    status = run_fuzz(settings)
    checks = checks_from_flags({"no_failed_check": status == 0})
    run.write(out, {"schemathesis_exit_status": status,
                    "junit": str(settings.report_dir / "junit.xml")},
              settings={**settings_of(settings), "out": str(out)}, checks=checks)
    print(f"wrote {out}")
    return 0 if all_ok(checks) else 1
