"""`adaptserve plan | simulate`: offline planning and simulation from the command line."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from app.sim.report import write_json
from policies.profile import LatencyModel, Profile


def _model(args: argparse.Namespace) -> LatencyModel:
    if args.profile:
        profile = Profile.from_dict(json.loads(Path(args.profile).read_text()))
    else:
        from app.sim.ramsis.data import load_ramsis_profile

        profile = load_ramsis_profile(args.task, data_dir=args.data_dir)
    return LatencyModel.from_profile(profile, args.percentile, args.max_batch)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="image", choices=["image", "text"],
                   help="RAMSIS task whose public profiles to use (ignored with --profile)")
    p.add_argument("--profile", help="a profile JSON of ours instead of the RAMSIS profiles")
    p.add_argument("--data-dir", help="shared data directory (default ../shared/data)")
    p.add_argument("--percentile", default="p95", choices=["mean", "p50", "p95", "p99"])
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--slo-ms", type=float, default=150.0)
    p.add_argument("--workers", type=int, default=60)
    p.add_argument("--out", type=Path, default=Path("results"))


def cmd_plan(args: argparse.Namespace) -> int:
    from app.sim.ramsis.planning import plan_policy_set
    from policies.model_selection.mdp_spec import MDPSpec

    model = _model(args)
    base = MDPSpec(args.slo_ms / 1000, args.workers, args.min_qps)
    tables = plan_policy_set(base, model, args.min_qps, args.max_qps, args.step_qps,
                             cache_dir=args.out / "cache", progress=True)
    for t in tables:
        write_json(args.out / f"ramsis_W{args.workers}_{args.slo_ms:g}ms_{t.load_qps:g}qps.json",
                   t.to_dict())
    print(f"{len(tables)} policies -> {args.out}")
    for t in tables:
        print(f"  {t.load_qps:8.1f} QPS  E[acc] {t.expected_accuracy:.4f}  E[viol] {t.expected_violation:.5f}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    if args.experiment == "scenario":
        from app.sim.ramsis.experiments import Scenario, run_scenario
        from app.sim.report import plot_usage, scenario_table

        model = _model(args)
        s = Scenario(args.slo_ms / 1000, args.workers, args.trace, qps=args.qps,
                     duration_s=args.duration_s or (30.0 if args.trace == "constant" else 300.0),
                     seed=args.seed, policies=tuple(args.policies.split(",")))
        result = run_scenario(s, model, progress=True)
        print(scenario_table(result))
        write_json(args.out / "scenario.json", result)
        plot_usage(result, model.names, args.out / "scenario_usage.png")
    elif args.experiment == "paper":
        from app.sim.ramsis.paper import gains, paper_table, plot_paper, run_paper

        workers = list(range(20, 101, 10)) if not args.worker_list else [int(w) for w in args.worker_list.split(",")]
        tasks = args.tasks.split(",")
        results = run_paper(tasks, workers, int(args.duration_s or 300), args.jobs, args.data_dir)
        print(paper_table(results))
        summary = {t: gains(results, t) for t in tasks}
        print(json.dumps(summary, indent=1))
        write_json(args.out / "paper.json", {"results": results, "gains": summary})
        plot_paper(results, args.out / "paper_accuracy.png")
    elif args.experiment == "fidelity":
        from app.sim.ramsis.fidelity import fidelity_table, run_fidelity

        rows = run_fidelity(_model(args), args.slo_ms / 1000, [40, 60, 80],
                            [float(q) for q in range(400, 4001, 400)], args.duration_s or 30.0)
        print(fidelity_table(rows))
        write_json(args.out / "fidelity.json", rows)
    else:
        return _simulate_other(args)
    print(f"wrote {args.out}")
    return 0


def _simulate_other(args: argparse.Namespace) -> int:
    """Issue-3 experiments (the same code as scripts/bench_mosel.py / bench_otas.py): print a
    table, write <experiment>.json and <experiment>.png under --out. --profile PATH runs them
    on a measured profile (docs/mosel.md, docs/otas.md say how its variants are read)."""
    args.out.mkdir(parents=True, exist_ok=True)
    if args.experiment == "mosel":
        from app.sim.mosel.report import DEFAULT_PROFILES, mosel_table, plot_mosel, run_mosel_suite

        profiles = [args.profile] if args.profile else list(DEFAULT_PROFILES)
        result = run_mosel_suite(profiles, range(args.seed, args.seed + args.num_seeds))
        table = mosel_table(result)
        plot = plot_mosel
    elif args.experiment == "otas":
        from app.sim.otas.report import otas_table, plot_otas
        from app.sim.otas.sim import SETUPS, run_otas_experiment

        efficiency, skew = SETUPS[args.otas_setup]
        result = run_otas_experiment(duration_s=int(args.duration_s or 300), seed=args.seed,
                                     profile_json=args.profile, serving_efficiency=efficiency,
                                     level_skew=skew)
        result["config"]["setup"] = args.otas_setup
        table = otas_table(result)
        plot = plot_otas
    else:
        raise SystemExit(f"unknown experiment {args.experiment!r}")
    print(table)
    write_json(args.out / f"{args.experiment}.json", result)
    plot(result, args.out / f"{args.experiment}.png")
    print(f"wrote {args.out / (args.experiment + '.json')} and "
          f"{args.out / (args.experiment + '.png')}")
    return 0


def _simulate_other_args(sim: argparse.ArgumentParser) -> None:
    sim.add_argument("--num-seeds", type=int, default=10,
                     help="--experiment mosel: seeds --seed .. --seed + N - 1")
    sim.add_argument("--otas-setup", default="paper", choices=["paper", "raw"],
                     help="--experiment otas: paper-calibrated load (default) or Fig. 4b raw")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adaptserve")
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="profiles -> RAMSIS policy files")
    _common(plan)
    plan.add_argument("--min-qps", type=float, default=200.0)
    plan.add_argument("--max-qps", type=float, default=4000.0)
    plan.add_argument("--step-qps", type=float, default=400.0)
    plan.set_defaults(func=cmd_plan)
    sim = sub.add_parser("simulate", help="trace x policy x workers -> table + JSON + PNG")
    _common(sim)
    sim.add_argument("--experiment", default="scenario",
                     choices=["scenario", "paper", "fidelity", "mosel", "otas"])
    sim.add_argument("--trace", default="constant", choices=["constant", "twitter"])
    sim.add_argument("--qps", type=float, default=2000.0)
    sim.add_argument("--duration-s", type=float, default=None)
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument("--policies", default="ramsis,jellyfish,modelswitching")
    sim.add_argument("--tasks", default="image,text")
    sim.add_argument("--worker-list", default=None, help="comma list for --experiment paper")
    sim.add_argument("--jobs", type=int, default=2)
    _simulate_other_args(sim)
    sim.set_defaults(func=cmd_simulate)
    from app.cli import profile as cli_profile

    cli_profile.add_parser(sub)
    from app.cli import loadgen as cli_loadgen

    cli_loadgen.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
