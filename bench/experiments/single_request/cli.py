"""Single requests at 1x/2x/3x capacity beside a FastAPI+torch floor, in one run (table + a
Result + PNG; docs/front.md).

    RAY_AUTH_MODE=disabled .venv/bin/python -m bench single-request [--docs]

On a private local Ray Serve (HTTP port --port): the app (serve_config.yaml, --policy to
override the family's), single /v1/classify requests to --family at --slo-ms: a capacity ramp,
then Poisson runs at 1x, 2x, 3x the capacity; then Ray stopped, a one-process FastAPI + torch
server of the family's most accurate variant ramped the same way. With --serve-floor, between
the two, Serve's own floor (ingress, one handle hop, a constant answer; a fresh Ray) ramped and
run at the app's 1x rate, for the path's CPU per request beside Serve's. The phases are
bench/experiments/single_request/run.py; the figures bench/experiments/single_request/metrics.py and front_report.py.

The simulator beside a finished run (no Ray, no server; bench/experiments/fidelity/classify/single_request.py):

    .venv/bin/python -m bench fidelity single-request --resim RUN.json [--records DIR] [--resim-seeds N]
        [--cores N] [--no-door] [--out COMPARISON.json]

Checks: attainment of admitted requests >= 95%, goodput at 3x >= 0.9x that at 1x, refusals'
p99 < 20 ms, simulator gap <= 2 points, capacity >= 2x --baseline's (report/TARGETS).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench.core.cli import experiment_parser, log_progress
from bench.core.result import Check
from bench.experiments.single_request.metrics import RampRule
from bench.experiments.single_request.run import FrontSettings


def parse(argv: list[str] | None = None) -> tuple[FrontSettings, Path, Path]:
    p = experiment_parser(__doc__, out="results/front/front.json", seed=0, port=8100,
                          config="serve_config.yaml")
    p.add_argument("--torch-port", type=int, default=8200)
    p.add_argument("--family", default="family")
    p.add_argument("--policy", default=None, help="the family's policy (default: as configured)")
    p.add_argument("--slo-ms", type=float, default=200.0)
    p.add_argument("--warmup-s", type=float, default=5.0)
    p.add_argument("--ramp-start", dest="ramp_start_qps", type=float, default=20.0,
                   help="first ramp rate, requests/s")
    p.add_argument("--ramp-factor", type=float, default=1.4)
    p.add_argument("--ramp-steps", type=int, default=10)
    p.add_argument("--ramp-s", type=float, default=10.0, help="each ramp step")
    p.add_argument("--duration-s", type=float, default=30.0, help="each 1x/2x/3x run")
    p.add_argument("--multiples", type=float, nargs="+", default=[1.0, 2.0, 3.0])
    p.add_argument("--min-attainment", type=float, default=0.95,
                   help="of sent, for a ramp step to count towards capacity")
    p.add_argument("--settle-s", type=float, default=5.0)
    p.add_argument("--num-cpus", type=int, default=8, help="Ray logical CPUs")
    p.add_argument("--floor-multiples", type=float, nargs="*", default=[],
                   help="also run the FastAPI + torch floor and then the app at these multiples "
                        "of the floor's capacity (correct answers within the SLO, side by side)")
    p.add_argument("--no-torch", dest="torch_floor", action="store_false",
                   help="skip the FastAPI + torch server")
    p.add_argument("--serve-floor", action="store_true",
                   help="also ramp Serve's own no-model floor (a fresh Ray) and run it at the "
                        "app's 1x rate: the path's CPU per request beside Serve's")
    p.add_argument("--busy-neighbours", type=int, default=0,
                   help="busy-loop processes beside the whole run (a second machine state)")
    p.add_argument("--baseline", type=Path, default=None,
                   help="an earlier run's JSON (today's code), for the capacity ratio")
    p.add_argument("--records", type=Path, default=Path("results/front/records"))
    p.add_argument("--png", type=Path, default=Path("results/front/front.png"))
    p.add_argument("--docs", action="store_true",
                   help="write docs/data_front.json and docs/figures/front.png instead")
    a = vars(p.parse_args(argv))
    out, png, docs = a.pop("out"), a.pop("png"), a.pop("docs")
    if docs:
        out, png = Path("docs/data_front.json"), Path("docs/figures/front.png")
    rule = RampRule(min_attainment=a.pop("min_attainment"))
    settings = FrontSettings(**{**a, "multiples": tuple(a["multiples"]),
                                "floor_multiples": tuple(a["floor_multiples"])}, rule=rule,
                             command=" ".join(["python -m bench single-request",
                                               *(sys.argv[1:] if argv is None else argv)]))
    return settings, out, png


# pass flag -> (figure in out["checks"], target: report.TARGETS)
FIGURES = {"attainment_admitted>=95%": ("attainment_admitted_min", ">= 0.95"),
           "goodput_3x>=0.9x1x": ("goodput_3x_over_1x", ">= 0.9"),
           "refusal_p99<20ms": ("refusal_p99_ms_max", "< 20 ms"),
           "gap<=2pts": ("gap_pts_max_abs", "<= 2 points"),
           "capacity>=2x_baseline": ("app_over_baseline", ">= 2.0"),
           "correct_vs_torch>=1.5": ("correct_over_torch_min", ">= 1.5"),
           "path<=1.25x_serve_floor": ("path_over_serve_floor", "<= 1.25")}


def result_checks(checks: dict[str, Any]) -> list[Check]:
    """The run's pass flags as Checks, each with the figure it judges (None: not judged)."""
    out = []
    for name, ok in checks["pass"].items():
        figure, target = FIGURES.get(name, (None, True))
        out.append(Check(name, ok if figure is None else checks[figure], target, ok))
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    settings, out_path, png = parse(args)
    log_progress()
    from bench.core.cli import settings_of
    from bench.core.result import Run
    from bench.core.run_report import clean
    from bench.experiments.single_request.report import plot, report
    from bench.experiments.single_request.run import run_front

    run = Run()
    out = run_front(settings)
    print(report(out))
    checks = result_checks(out["checks"])
    code = run.finish(out_path, clean(out), checks=checks, also=(png,), settings={
        **settings_of(settings), "out": str(out_path), "png": str(png)})
    plot(out, png)
    return code
