"""Fuzz the HTTP API with schemathesis against a real running server (issue 11; CI runs it).

    RAY_AUTH_MODE=disabled .venv/bin/python -m bench fuzz [--max-time-s 180]
    (or scripts/fuzz.sh, which bootstraps the venv first)

Starts a private local Ray Serve of the default app (serve_config.yaml) on a free local port
with an API key set, fuzzes every operation of its /openapi.json for --max-time-s seconds
(the checks: schemathesis.toml), shuts Ray down. Exit status 0 only when no check failed:
no 5xx, and every status code, content type, header and body as the OpenAPI declares.
The run is bench/experiments/fuzz/run.py.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bench.core.http import free_port
from bench.experiments.fuzz.run import FuzzSettings, run_fuzz


def parse(argv: list[str] | None = None) -> FuzzSettings:
    d = FuzzSettings()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", type=Path, default=d.config)
    p.add_argument("--port", type=int, default=0, help="the private Serve's port (0: a free one)")
    p.add_argument("--max-time-s", type=int, default=d.max_time_s,
                   help="schemathesis' time budget, all phases")
    p.add_argument("--workers", type=int, default=d.workers)
    p.add_argument("--num-cpus", type=int, default=d.num_cpus, help="Ray logical CPUs")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--report-dir", type=Path, default=d.report_dir)
    a = vars(p.parse_args(argv))
    a["port"] = a["port"] or free_port()
    return FuzzSettings(**a)


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("bench").setLevel(logging.INFO)
    return run_fuzz(parse())


if __name__ == "__main__":
    sys.exit(main())
