"""`adaptserve simulate`: one offline experiment -> a printed table, JSON and PNG under --out.

RAMSIS experiments (scenario, paper, fidelity) and the issue-3 ones (mosel, otas: the same code
as scripts/bench_mosel.py / bench_otas.py; --profile PATH runs them on a measured profile, and
docs/mosel.md, docs/otas.md say how its variants are read; --setting served runs the replicas'
scheduler objects, --setting paper the paper's execution model).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from app.cli.common import add_common_args, latency_model, shared_data
from app.sim.report import write_json


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
    write_json(args.out / "scenario.json", result)
    plot_usage(result, model.names, args.out / "scenario_usage.png")
    return _wrote(args)


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
    write_json(args.out / "paper.json", {"results": results, "gains": summary})
    plot_paper(results, args.out / "paper_accuracy.png")
    return _wrote(args)


def _fidelity(args: argparse.Namespace) -> int:
    from app.sim.ramsis.fidelity import fidelity_table, run_fidelity

    rows = run_fidelity(latency_model(args), args.slo_ms / 1000, [40, 60, 80],
                        [float(q) for q in range(400, 4001, 400)], args.duration_s or 30.0)
    print(fidelity_table(rows))
    write_json(args.out / "fidelity.json", rows)
    return _wrote(args)


def _wrote(args: argparse.Namespace) -> int:
    print(f"wrote {args.out}")
    return 0


def _mosel(args: argparse.Namespace) -> tuple[dict[str, Any], str, Callable[..., None]]:
    from app.sim.mosel.report import DEFAULT_PROFILES, mosel_table, plot_mosel, run_mosel_suite

    profiles = [args.profile] if args.profile else list(DEFAULT_PROFILES)
    result = run_mosel_suite(profiles, range(args.seed, args.seed + args.num_seeds),
                             data_dir=shared_data(args), setting=args.setting)
    return result, mosel_table(result), plot_mosel


def _otas(args: argparse.Namespace) -> tuple[dict[str, Any], str, Callable[..., None]]:
    from app.sim.otas.experiment import SETUPS, run_otas_experiment
    from app.sim.otas.report import otas_table, plot_otas

    efficiency, skew = SETUPS[args.otas_setup]
    result = run_otas_experiment(duration_s=int(args.duration_s or 300), seed=args.seed,
                                 profile_json=args.profile, serving_efficiency=efficiency,
                                 level_skew=skew, setting=args.setting)
    result["config"]["setup"] = args.otas_setup
    return result, otas_table(result), plot_otas


def _issue3(run: Callable[[argparse.Namespace],
                          tuple[dict[str, Any], str, Callable[..., None]]]
            ) -> Callable[[argparse.Namespace], int]:
    """An issue-3 experiment's command: print its table, write <experiment>.json and .png."""
    def command(args: argparse.Namespace) -> int:
        args.out.mkdir(parents=True, exist_ok=True)
        result, table, plot = run(args)
        print(table)
        json_path, png_path = (args.out / f"{args.experiment}.{ext}" for ext in ("json", "png"))
        write_json(json_path, result)
        plot(result, png_path)
        print(f"wrote {json_path} and {png_path}")
        return 0

    return command


EXPERIMENTS: dict[str, Callable[[argparse.Namespace], int]] = {
    "scenario": _scenario, "paper": _paper, "fidelity": _fidelity,
    "mosel": _issue3(_mosel), "otas": _issue3(_otas),
}


def cmd_simulate(args: argparse.Namespace) -> int:
    return EXPERIMENTS[args.experiment](args)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `simulate` on the `adaptserve` subparsers."""
    sim: argparse.ArgumentParser = subparsers.add_parser(
        "simulate", help="trace x policy x workers -> table + JSON + PNG")
    add_common_args(sim)
    sim.add_argument("--experiment", default="scenario", choices=list(EXPERIMENTS))
    sim.add_argument("--trace", default="constant", choices=["constant", "twitter"])
    sim.add_argument("--qps", type=float, default=2000.0)
    sim.add_argument("--duration-s", type=float, default=None)
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--policies", default="ramsis,jellyfish,modelswitching")
    sim.add_argument("--tasks", default="image,text")
    sim.add_argument("--worker-list", default=None, help="comma list for --experiment paper")
    sim.add_argument("--jobs", type=int, default=2)
    sim.add_argument("--num-seeds", type=int, default=10,
                     help="--experiment mosel: seeds --seed .. --seed + N - 1")
    sim.add_argument("--otas-setup", default="paper", choices=["paper", "raw"],
                     help="--experiment otas: paper-calibrated load (default) or Fig. 4b raw")
    sim.add_argument("--setting", default="served", choices=["served", "paper"],
                     help="--experiment mosel/otas: served = through the replicas' scheduler "
                          "objects and scheduling step (default); paper = the paper's execution "
                          "model (MOSEL re-plans at every arrival, OTAS batches mix tasks)")
    sim.set_defaults(func=cmd_simulate)
    return sim
