"""RAMSIS in the simulator, one run -> a printed table, a Result (--out, default
results/<experiment>.json) and its plot beside it:

    python -m bench ramsis --experiment scenario   one trace x policies x workers (+ _usage.png)
    python -m bench ramsis --experiment paper      the paper's figures, workers 20..100 (+ _accuracy.png)
    python -m bench ramsis --experiment fidelity   the simulator against the paper's numbers

--profile PATH runs them on a measured profile of ours instead of the RAMSIS public ones.
(MOSEL and OTAS: `python -m bench mosel`, `python -m bench otas`.)
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.cli.common import add_common_args, latency_model, shared_data
from bench.core.cli import experiment_parser, settings_of
from bench.core.result import Run


def _scenario(args: argparse.Namespace) -> int:
    from app.sim.ramsis.experiments import Scenario, run_scenario
    from app.sim.report import plot_usage, scenario_table

    model = latency_model(args)
    s = Scenario(args.slo_ms / 1000, args.workers, args.trace, qps=args.qps,
                 duration_s=args.duration_s or (30.0 if args.trace == "constant" else 300.0),
                 seed=args.seed, policies=tuple(args.policies.split(",")),
                 data_dir=shared_data(args) if args.trace == "twitter" else None)
    result = run_scenario(s, model, progress=True)
    print(scenario_table(result))
    _write(args, result)
    plot_usage(result, model.names, _beside(args.out, "_usage.png"))
    return _wrote(args, "_usage.png")


def _paper(args: argparse.Namespace) -> int:
    from app.sim.ramsis.paper import gains, paper_table, plot_paper, run_paper

    workers = (list(range(20, 101, 10)) if not args.worker_list
               else [int(w) for w in args.worker_list.split(",")])
    tasks = args.tasks.split(",")
    results = run_paper(tasks, workers, int(args.duration_s or 300), args.jobs,
                        shared_data(args))
    print(paper_table(results))
    summary = {t: gains(results, t) for t in tasks}
    print(json.dumps(summary, indent=1))
    _write(args, {"results": results, "gains": summary})
    plot_paper(results, _beside(args.out, "_accuracy.png"))
    return _wrote(args, "_accuracy.png")


def _fidelity(args: argparse.Namespace) -> int:
    from app.sim.ramsis.fidelity import fidelity_table, run_fidelity

    rows = run_fidelity(latency_model(args), args.slo_ms / 1000, [40, 60, 80],
                        [float(q) for q in range(400, 4001, 400)], args.duration_s or 30.0)
    print(fidelity_table(rows))
    _write(args, rows)
    return _wrote(args)


def _beside(out: Path, suffix: str) -> Path:
    return out.with_name(out.stem + suffix)


def _write(args: argparse.Namespace, data: Any) -> None:
    args.run.write(args.out, data,
                   settings=settings_of({k: v for k, v in vars(args).items() if k != "run"}))


def _wrote(args: argparse.Namespace, plot: str | None = None) -> int:
    print(f"wrote {args.out}" + (f" and {_beside(args.out, plot)}" if plot else ""))
    return 0


EXPERIMENTS: dict[str, Callable[[argparse.Namespace], int]] = {
    "scenario": _scenario, "paper": _paper, "fidelity": _fidelity,
}


def main(argv: list[str] | None = None) -> int:
    sim = experiment_parser(__doc__, out=None, seed=0)
    add_common_args(sim, out=False)
    sim.add_argument("--experiment", default="scenario", choices=list(EXPERIMENTS))
    sim.add_argument("--trace", default="constant", choices=["constant", "twitter"])
    sim.add_argument("--qps", type=float, default=2000.0)
    sim.add_argument("--duration-s", type=float, default=None)
    sim.add_argument("--policies", default="ramsis,jellyfish,modelswitching")
    sim.add_argument("--tasks", default="image,text")
    sim.add_argument("--worker-list", default=None, help="comma list for --experiment paper")
    sim.add_argument("--jobs", type=int, default=2)
    args = sim.parse_args(argv)
    if args.out is None:
        args.out = Path("results") / f"{args.experiment}.json"
    args.run = Run()
    return EXPERIMENTS[args.experiment](args)
