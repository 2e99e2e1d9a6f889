"""MOSEL benchmark: four policies x two profiles on the Twitter-shaped load, plus decision costs.

    .venv/bin/python -m bench mosel --out results/mosel/mosel.json       # served
    .venv/bin/python -m bench mosel --out results/mosel_paper/mosel.json --setting paper
    .venv/bin/python -m bench mosel --cost-only     # re-plan decision cost only

Prints a table, writes the Result to --out and the plot beside it (mosel.png); the costs:
bench/experiments/papers/mosel_costs.py.
"""

from __future__ import annotations

from app.sim.mosel.report import mosel_table, plot_mosel, run_mosel_suite
from bench.core.cli import experiment_parser, settings_of
from bench.core.result import Run
from bench.experiments.papers.mosel_costs import matrix_build_times, replan_cost
from profiling.paths import shared_data_dir


def _print_cost(profile: str, cost: dict[str, float]) -> None:
    print(f"  {profile}: re-plan {cost['jobs']:.0f} jobs wall p50 {cost['p50_ms']:.3f} / p99 "
          f"{cost['p99_ms']:.3f} ms, cpu p50 {cost['cpu_p50_ms']:.3f} / p99 "
          f"{cost['cpu_p99_ms']:.3f} ms ({cost['trials']:.0f} trials)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = experiment_parser(__doc__, out="results/mosel/mosel.json")
    ap.add_argument("--profiles", nargs="+", default=["tvlt-like", "three-modality"],
                    help="built-in names or measured profile JSON paths")
    ap.add_argument("--profile", default=None, help="one measured profile JSON (overrides)")
    ap.add_argument("--seeds", nargs="+", type=int, default=list(range(10)))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--setting", default="served", choices=["served", "paper"],
                    help="served: the replicas' MoselScheduler and scheduling step; paper: the "
                         "paper's re-plan at every arrival (docs/mosel.md)")
    ap.add_argument("--replan-jobs", nargs="+", type=int, default=[40, 100])
    ap.add_argument("--replan-trials", type=int, default=2000)
    ap.add_argument("--gekko-sizes", type=int, default=8)
    ap.add_argument("--gekko-levels", type=int, default=5)
    ap.add_argument("--cost-only", action="store_true",
                    help="only the re-plan decision cost: no suite, no matrix build, no files")
    ap.add_argument("--data-dir", default=None,
                    help="shared data directory, the Twitter trace (default ../shared/data)")
    args = ap.parse_args(argv)
    run = Run()
    profiles = [args.profile] if args.profile else args.profiles
    if args.cost_only:
        for prof in profiles:
            for jobs in args.replan_jobs:
                _print_cost(prof, replan_cost(prof, jobs, args.replan_trials, seed=0))
        return 0
    results = run_mosel_suite(profiles, args.seeds, args.workers,
                              data_dir=shared_data_dir(args.data_dir), setting=args.setting)
    results.update({"replan_cost": [], "matrix_build": []})
    print(mosel_table(results))
    print("\ndecision cost (optimized re-plan) and matrix build:")
    for prof in profiles:
        build = matrix_build_times(prof, args.gekko_sizes, args.gekko_levels)
        results["matrix_build"].append(build)
        for jobs in args.replan_jobs:
            cost = replan_cost(prof, jobs, args.replan_trials, seed=0)
            results["replan_cost"].append({"profile": prof, **cost})
            _print_cost(prof, cost)
        print(f"  {prof}: matrix 64x20 exact {build['exact_64x20_s']:.3f} s; "
              f"{args.gekko_sizes}x{args.gekko_levels} grid: exact {build['exact_small_s']:.3f} s, "
              f"gekko {build.get('gekko_small_s')} s, agreeing cells "
              f"{build.get('gekko_cells_agreeing')}/{build.get('cells')}")
    run.write(args.out, results, settings=settings_of(args))
    png = args.out.with_suffix(".png")
    plot_mosel(results, png)
    print(f"\nwrote {args.out} and {png}")
    return 0
