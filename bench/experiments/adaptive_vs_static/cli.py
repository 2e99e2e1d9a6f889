"""The adaptive policy against static configurations, live, beside the simulator's prediction,
in one run (table + a Result, docs/data_live.json + PNG).

    .venv/bin/python -m bench adaptive-vs-static [--config serve_config.yaml] [--port 8100]

Phases on a private local Ray/Serve (HTTP port --port), all with `bench/core/client.py`
(the code: bench/experiments/adaptive_vs_static/phases.py, live_sim.py):
 1. default app (serve_config.yaml as is) + the bare graph (bench/experiments/single_request/bare_graph.py, same family, its most
    accurate variant), both driven at the same time at light load: overhead p50
    (latency - compute), app vs bare (c); RSS of every replica process of the default app (d);
 2. the family on each static configuration (--statics: the most accurate variant, or every
    fixed gamma / modality subset / variant, bench/experiments/adaptive_vs_static/statics.py), K replicas: capacity
    from the profile, and live: a geometric ramp until goodput stops rising; capacity = the
    best goodput seen; the best static configuration = the highest capacity (a);
 3. 2x that capacity, same trace and seed: every static configuration, then the adaptive
    policy (a);
 4. the scheduler simulator on the same profile, plan files, trace and seed (b).
Beside goodput: OTAS's utility and MOSEL's goodput at the accuracy SLO per run, live and
simulated (bench/experiments/adaptive_vs_static/knob_metrics.py; --utilities, --min-accuracy), and their plot
(<png stem>_knobs.png). Checks: goodput at 2x >= 2x the best static's, attainment of admitted
requests >= 95%, overhead ratio <= 1.3, memory <= 6 GiB, the simulator within 2 points.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.core.cli import experiment_parser, log_progress, settings_of
from bench.core.result import Check, Run, all_ok
from bench.core.run_report import clean
from bench.experiments.adaptive_vs_static.knob_metrics import parse_utilities
from bench.experiments.adaptive_vs_static.report import report
from bench.experiments.adaptive_vs_static.settings import LiveBenchSettings


def parse(argv: list[str] | None = None) -> LiveBenchSettings:
    p = experiment_parser(__doc__, out="docs/data_live.json", seed=0, port=8100,
                          config="serve_config.yaml")
    p.add_argument("--family", default="family")
    p.add_argument("--policy", default="ramsis", help="adaptive scheduler of the family")
    p.add_argument("--replicas", type=int, default=None, help="K (default: as configured)")
    p.add_argument("--slo-ms", type=float, default=None, help="default: the family's SLO")
    p.add_argument("--trace", default="poisson", choices=["poisson", "twitter", "constant"])
    p.add_argument("--duration-s", type=float, default=60.0, help="each 2x-load run")
    p.add_argument("--ramp-s", type=float, default=15.0, help="each capacity ramp step")
    p.add_argument("--ramp-start", dest="ramp_start_qps", type=float, default=10.0,
                   help="first ramp rate, items/s")
    p.add_argument("--ramp-factor", type=float, default=1.5)
    p.add_argument("--ramp-steps", type=int, default=8)
    p.add_argument("--job-size", type=int, default=1,
                   help="items per request of the ramp and 2x runs (>1: POST /v1/jobs)")
    p.add_argument("--settle-s", type=float, default=10.0, help="pause after a redeploy")
    p.add_argument("--warmup-s", type=float, default=15.0, help="adaptive warm-up run")
    p.add_argument("--light-qps", type=float, default=4.0)
    p.add_argument("--light-s", type=float, default=30.0)
    p.add_argument("--sim-service", default="sampled", help="p50|p95|mean|sampled")
    p.add_argument("--sim-seeds", type=int, default=3, help="simcal runs pooled")
    p.add_argument("--num-cpus", type=int, default=8, help="Ray logical CPUs")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="shared data directory, read by --trace twitter (default ../shared/data)")
    p.add_argument("--png", type=Path, default=Path("docs/figures/live.png"))
    p.add_argument("--records", type=Path, default=Path("results/bench_live"))
    p.add_argument("--statics", default="most_accurate",
                   help="static configurations compared: most_accurate, all (every fixed "
                        "gamma / modality subset / variant meeting --min-accuracy; the best = "
                        "highest live capacity), or labels of all, comma-separated")
    p.add_argument("--load-of", default=None, metavar="LABEL",
                   help="the static configuration whose live capacity is 1x (and the 2x runs' "
                        "load; default: the best, the highest capacity), e.g. g0 for OTAS's "
                        "'2x gamma 0's capacity'; every other static still runs at that 2x")
    p.add_argument("--min-accuracy", type=float, default=None,
                   help="accuracy SLO sent with every request (MOSEL's); judged per call")
    p.add_argument("--utilities", type=parse_utilities, default=(),
                   help="utility per call, cyclic: table2 (OTAS's Table II) or 0.3,1,...")
    p.add_argument("--busy-neighbours", type=int, default=0,
                   help="busy-loop processes beside the live phases (a second machine state)")
    args = p.parse_args(argv)
    return LiveBenchSettings(**vars(args), command=" ".join(
        ["python -m bench adaptive-vs-static", *(sys.argv[1:] if argv is None else argv)]))


# the figures the pass flags judge: flag -> (figure in out["checks"], target)
FIGURES = {"goodput_ratio>=2": ("goodput_ratio", ">= 2.0"),
           "correct_ratio>=1.5": ("correct_ratio", ">= 1.5"),
           "accuracy_1x_within_1pt": ("accuracy_1x_gap_pts", "<= 1.0"),
           "accuracy_1x_same_items_within_1pt": ("accuracy_1x_gap_same_items_pts", "<= 1.0"),
           "utility>=1.1x_best_static": ("utility_over_best_static", ">= 1.1"),
           "attainment_admitted>=95%": ("adaptive_attainment_admitted", ">= 0.95"),
           "overhead_ratio<=1.3": ("overhead_ratio", "<= 1.3"),
           "memory<=6GiB": ("memory_total_mib", "<= 6144")}


def result_checks(checks: dict[str, Any]) -> list[Check]:
    """The run's pass flags as Checks: the figure and its target where a figure is judged,
    else the flag itself (the simulator within 2 points)."""
    out = []
    for name, ok in checks["pass"].items():
        figure, target = FIGURES.get(name, (None, True))
        out.append(Check(name, ok if figure is None else checks[figure], target,
                         None if ok is None else bool(ok)))
    return out


def main(argv: list[str] | None = None) -> int:
    settings = parse(argv)
    run = Run()
    log_progress()
    from bench.experiments.adaptive_vs_static.phases import run_live

    out = run_live(settings)
    print(report(out))
    checks = result_checks(out["checks"])
    run.write(settings.out, clean(out), settings=settings_of(settings), checks=checks)
    print(f"wrote {settings.out} and {settings.png}")
    return 0 if all_ok(checks) else 1
