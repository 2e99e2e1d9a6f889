"""RAMSIS costs: policy generation time vs number of models, online lookup latency, simulator
throughput. Prints a table and writes a Result (--out). Run with OMP_NUM_THREADS=1 for
single-core figures.

    .venv/bin/python -m bench ramsis-costs [--model-counts 9,20,40,60] [--out results/bench_ramsis.json]
"""

from __future__ import annotations

from app.sim.ramsis.data import load_ramsis_profile
from bench.core.cli import experiment_parser, settings_of
from bench.core.result import Run
from bench.experiments.papers.ramsis_costs import (
    interpolated_models,
    time_generation,
    time_lookup,
    time_simulator,
)
from policies.model_selection.mdp import build_mdp
from policies.model_selection.mdp_spec import MDPSpec
from policies.model_selection.solve import solve
from policies.model_selection.table import PolicyTable, RamsisSelector
from policies.profile import LatencyModel
from profiling.paths import shared_data_dir


def main(argv: list[str] | None = None) -> int:
    parser = experiment_parser(__doc__, out="results/bench_ramsis.json")
    parser.add_argument("--model-counts", default="9,20,40,60")
    parser.add_argument("--sim-duration-s", type=int, default=60)
    parser.add_argument("--data-dir", default=None,
                        help="shared data directory (default ../shared/data)")
    args = parser.parse_args(argv)
    run = Run()
    data_dir = shared_data_dir(args.data_dir)
    base = LatencyModel.from_profile(load_ramsis_profile("image", data_dir=data_dir), "p95", 32)
    spec = MDPSpec(0.15, 60, 2000.0)
    gen = []
    print(f"{'models':>7}{'states':>8}{'rows':>7}{'build s':>9}{'solve s':>9}{'CPU s':>8}{'wall s':>8}{'E[acc]':>8}")
    for count in [int(c) for c in args.model_counts.split(",")]:
        model = base if count == len(base.names) else interpolated_models(base, count)
        r = time_generation(model, spec)
        gen.append(r)
        print(f"{r['models']:>7}{r['states']:>8}{r['rows']:>7}{r['build_cpu_s']:>9.2f}{r['solve_cpu_s']:>9.2f}"
              f"{r['total_cpu_s']:>8.2f}{r['total_wall_s']:>8.2f}{r['expected_accuracy']:>8.4f}")
    table = PolicyTable.from_solved(solve(build_mdp(spec, base)), base.names)
    lookup = time_lookup(table)
    print(f"policy lookup: p50 {lookup['p50_us']:.2f} us, p99 {lookup['p99_us']:.2f} us")
    sim_table = PolicyTable.from_solved(solve(build_mdp(MDPSpec(0.15, 100, 2600.0), base)), base.names)
    sim = time_simulator(RamsisSelector([sim_table]), base, args.sim_duration_s, data_dir)
    print(f"simulator, 100 workers, Twitter trace {args.sim_duration_s} s: {sim['queries']} queries in "
          f"{sim['wall_s']:.2f} s = {sim['queries_per_wall_s']:.0f} queries/s of wall time")
    run.write(args.out, {"generation": gen, "lookup": lookup, "simulator": sim},
              settings=settings_of(args))
    print(f"wrote {args.out}")
    return 0
