"""Issue 11's reliability figures (table + JSON; docs/data_reliability.json with --docs).

    RAY_AUTH_MODE=disabled .venv/bin/python scripts/bench_reliability.py [--docs]

On a private local Ray Serve (HTTP port --port): single /v1/classify requests (Poisson,
--single-qps each) to every family of --families in every phase, and the RSS of the Serve
proxy and ingress sampled throughout. Phases (--phases): quiet (the baseline); slowloris
(--slow-clients connections announcing a --slow-length body and sending a byte a second:
408 expected after the edge's body read timeout); chunked (a --chunked-mb MB chunked body to
/v1/jobs: 413 expected, early); malformed (~60 bad requests: no 5xx, a JSON error each).
Targets: other traffic within 5 points of quiet attainment, proxy/ingress RSS within 10%.
The run is app/bench/reliability.py; the figures app/bench/reliability_report.py.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from app.bench.reliability import PHASES, ReliabilitySettings


def parse(argv: list[str] | None = None) -> tuple[ReliabilitySettings, Path, Path]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", type=Path, default=Path("serve_config.yaml"))
    p.add_argument("--port", type=int, default=8140)
    p.add_argument("--families", nargs="+", default=["vit", "fusion", "family"])
    p.add_argument("--single-qps", type=float, default=10.0, help="per family, requests/s")
    p.add_argument("--phases", nargs="+", default=list(PHASES), choices=PHASES)
    p.add_argument("--warmup-s", type=float, default=5.0)
    p.add_argument("--phase-s", type=float, default=15.0)
    p.add_argument("--slow-clients", type=int, default=1000)
    p.add_argument("--slow-length", type=int, default=10_000)
    p.add_argument("--slow-period-s", type=float, default=1.0)
    p.add_argument("--chunked-mb", type=float, default=400.0)
    p.add_argument("--num-cpus", type=int, default=8, help="Ray logical CPUs")
    p.add_argument("--settle-s", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--records", type=Path, default=Path("results/reliability/records.json"),
                   help="every request's record, the slow clients' answers, the RSS samples")
    p.add_argument("--out", type=Path, default=Path("results/reliability/reliability.json"))
    p.add_argument("--docs", action="store_true",
                   help="write docs/data_reliability.json instead")
    a = vars(p.parse_args(argv))
    out, docs, records = a.pop("out"), a.pop("docs"), a.pop("records")
    if docs:
        out = Path("docs/data_reliability.json")
    if "quiet" not in a["phases"]:
        p.error("--phases needs quiet (the baseline)")
    tuples = {k: tuple(a[k]) for k in ("families", "phases")}
    return ReliabilitySettings(**{**a, **tuples}, command=" ".join(sys.argv)), out, records


def main() -> int:
    settings, out_path, records = parse()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("app.bench").setLevel(logging.INFO)
    from app.bench.loadgen_report import write_json
    from app.bench.reliability import run_reliability
    from app.bench.reliability_report import figures, table

    out = run_reliability(settings)
    fig = figures(out)
    slim = {k: v for k, v in out.items() if k not in ("phases", "rss_samples", "malformed")}
    slim["phases"] = [{k: v for k, v in p.items() if k not in ("singles", "slow_clients")}
                      for p in out["phases"]]
    slim["records"] = str(records)
    print(f"commit {slim['commit']} (modified: {', '.join(slim['modified']) or '-'}); "
          f"run {slim['wall_s']:.0f} s, loadavg {slim['loadavg_1min_after_run']:.1f}, "
          f"RLIMIT_NOFILE {slim['nofile']}")
    print(table(fig))
    write_json(records, out)
    write_json(out_path, {**slim, "figures": fig})
    print(f"wrote {out_path} and {records}")
    return 0 if fig["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
