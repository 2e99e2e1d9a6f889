"""A worker node stopped under load: does every request get one answer, how fast does the app
serve again (table + a Result + PNG).

    RAY_AUTH_MODE=disabled .venv/bin/python -m bench node-loss    # ~4 min

A three-node local Ray cluster (0-CPU head with the one Serve proxy, two workers with
--worker-cpus each), the app deployed with `serve deploy` (code as a working_dir zip) with one
family (--family, --classifier-replicas replicas; --ingress-replicas ingress replicas).
Single /v1/classify requests (Poisson, --qps, each with its own X-Request-Id) and /healthz +
/v1/status reads every --watch-period-s; after --warmup-s + --steady-s the worker node holding
the family's classifier replica(s) is stopped (SIGTERM, then SIGKILL of what is left); the load
goes on until the app serves again, then --after-s more.
Targets: every request answered exactly once (0 connection errors and client timeouts), no 5xx
but 503, 503s fast (p99 < 100 ms); measured: the gap (stop -> first 200, -> /healthz 200),
attainment before and after. The run is bench/experiments/node_loss/run.py; the figures
bench/experiments/node_loss/report.py; the cluster bench/core/cluster.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.core.cli import experiment_parser, log_progress
from bench.core.result import Check
from bench.experiments.node_loss.run import STOPS, NodeLossSettings


def parse(argv: list[str] | None = None) -> tuple[NodeLossSettings, Path, Path]:
    p = experiment_parser(__doc__, out="docs/data_node_loss.json", seed=0)
    p.add_argument("--family", default="vit")
    p.add_argument("--classifier-replicas", type=int, default=1)
    p.add_argument("--ingress-replicas", type=int, default=2)
    p.add_argument("--worker-cpus", type=int, default=1, help="Ray CPUs per worker node")
    p.add_argument("--qps", type=float, default=10.0, help="single requests/s (Poisson)")
    p.add_argument("--slo-ms", type=float, default=None,
                   help="default: the family's default SLO in serve_config.yaml")
    p.add_argument("--warmup-s", type=float, default=5.0)
    p.add_argument("--steady-s", type=float, default=20.0)
    p.add_argument("--after-s", type=float, default=10.0)
    p.add_argument("--recover-timeout-s", type=float, default=180.0)
    p.add_argument("--request-timeout-s", type=float, default=30.0)
    p.add_argument("--watch-period-s", type=float, default=0.25)
    p.add_argument("--stop", choices=STOPS, default="term",
                   help="term: SIGTERM to the node's `ray start` (Ray drains the node, Serve "
                        "migrates its replicas); kill: SIGKILL to all its processes at once")
    p.add_argument("--stop-grace-s", type=float, default=40.0,
                   help="term: SIGKILL what is left of the node after this (Ray's drain on "
                        "SIGTERM takes up to 30 s)")
    p.add_argument("--graceful-shutdown-s", type=float, default=None,
                   help="Serve's graceful_shutdown_timeout_s for the app's deployments "
                        "(default: Serve's, 20 s)")
    p.add_argument("--ray-node-health", choices=("fast", "default"), default="fast",
                   help="fast: the GCS checks nodes every 1 s, 3 misses = dead (as the "
                        "cluster test); default: Ray's own (a crashed node is seen in ~15 s)")
    p.add_argument("--logs-dir", default="results/node_loss/logs",
                   help="the nodes' Serve logs are copied here ('' : not kept)")
    p.add_argument("--png", type=Path, default=Path("docs/figures/node_loss.png"))
    a = vars(p.parse_args(argv))
    out, png = a.pop("out"), a.pop("png")
    a["fast_node_health"] = a.pop("ray_node_health") == "fast"
    command = " ".join(["python -m bench node-loss", *(sys.argv[1:] if argv is None else argv)])
    return NodeLossSettings(**a, command=command), out, png


def result_checks(fig: dict[str, Any], out: dict[str, Any], fast_ms: float) -> list[Check]:
    """The figure's targets (report.figures' `passed`), one Check each."""
    return [Check("exactly_once", fig["exactly_once"], True, bool(fig["exactly_once"])),
            Check("other_5xx", fig["other_5xx"], 0, fig["other_5xx"] == 0),
            Check("p99_refused_ms", fig["p99_refused_ms"], f"< {fast_ms:g}",
                  bool(fig["fast_503"])),
            Check("recovered_s", out.get("recovered_s"), "recovers",
                  out.get("recovered_s") is not None)]


def main(argv: list[str] | None = None) -> int:
    settings, out_path, png = parse(argv)
    log_progress(timestamps=True)
    from bench.core.cli import settings_of
    from bench.core.result import Run
    from bench.core.run_report import clean
    from bench.experiments.node_loss.report import FAST_MS, figures, plot, rows, table
    from bench.experiments.node_loss.run import run_node_loss

    run = Run()
    out = run_node_loss(settings)
    given = {**settings_of(settings), "out": str(out_path), "png": str(png)}
    if "stop_s" not in out:
        run.write(out_path, clean(out), settings=given,
                  checks=[Check("node_stopped", False, True, False)])
        print(f"no node was stopped; wrote {out_path}")
        return 1
    fig = figures(out)
    rs = rows(fig, out["slo_ms"])
    print(f"commit {out['commit']} (modified: {', '.join(out['modified']) or '-'}); "
          f"run {out['wall_s']:.0f} s; stopped node {out['stopped']} "
          f"(before: {out['placement_before']}; after: {out['placement_after']})")
    print(table(rs))
    checks = result_checks(fig, out, FAST_MS)
    code = run.finish(out_path, clean({**out, "figures": fig, "rows": rs}), settings=given,
                      checks=checks, also=(png,))
    plot(out, png)
    return code
