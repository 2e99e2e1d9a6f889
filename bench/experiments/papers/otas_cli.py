"""OTAS benchmark: OTAS (Algorithm 2 and exact allocator) vs every fixed gamma on one trace,
Algorithm 2's shortfall, and the allocators' decision cost on 50 batches x 8 gammas.

    .venv/bin/python -m bench otas --out results/otas/otas.json                 # paper-calibrated
    .venv/bin/python -m bench otas --out results/otas_raw/otas.json --setup raw  # Fig. 4b, uniform
    .venv/bin/python -m bench otas --out results/otas_paper/otas.json --setting paper  # mixed tasks

Prints a table, writes the Result to --out and the plot beside it (otas.png).
"""

from __future__ import annotations

import json

from app.sim.otas.experiment import (
    SETUPS,
    load_profile,
    run_otas_experiment,
    token_profile_from_profile,
)
from app.sim.otas.report import otas_table, plot_otas
from bench.core.cli import experiment_parser, settings_of
from bench.core.result import Run
from bench.experiments.papers.otas_costs import decision_cost


def main(argv: list[str] | None = None) -> int:
    ap = experiment_parser(__doc__, out="results/otas/otas.json", seed=0)
    ap.add_argument("--setup", default="paper", choices=sorted(SETUPS),
                    help="paper: Table-I serving efficiency + paper-calibrated trace; "
                         "raw: Figure 4b throughput + uniform levels (see docs/otas.md)")
    ap.add_argument("--setting", default="served", choices=["served", "paper"],
                    help="served: one OtasScheduler per task through the replicas' scheduling "
                         "step; paper: batches mixing tasks, as the paper (docs/otas.md)")
    ap.add_argument("--duration-s", type=int, default=300)
    ap.add_argument("--min-qps", type=float, default=200.0)
    ap.add_argument("--max-qps", type=float, default=700.0)
    ap.add_argument("--profile-json", default=None, help="measured profile (policies.profile)")
    ap.add_argument("--rate-table", default="profile", choices=["profile", "paper"])
    ap.add_argument("--headroom", type=float, default=0.9)
    ap.add_argument("--trials", type=int, default=300, help="DP timing trials")
    ap.add_argument("--no-ablation", action="store_true", help="skip the *-dponly ablations")
    args = ap.parse_args(argv)
    run = Run()
    efficiency, skew = SETUPS[args.setup]
    profile = token_profile_from_profile(load_profile(args.profile_json, efficiency))
    policies = ["otas-exact", "otas-alg2"]
    if not args.no_ablation:
        policies += ["otas-exact-dponly", "otas-alg2-dponly"]
    policies += [f"fixed{g}" for g in profile.gammas]
    report = run_otas_experiment(args.duration_s, args.seed, args.min_qps, args.max_qps,
                                 args.profile_json, policies, args.rate_table, args.headroom,
                                 serving_efficiency=efficiency, level_skew=skew,
                                 setting=args.setting)
    report["config"]["setup"] = args.setup
    report["decision_cost"] = decision_cost(profile, args.trials, args.seed)
    print(otas_table(report))
    cost = report["decision_cost"]
    print(f"decision cost, 50 batches x {cost['num_gammas']} gammas ({cost['trials']} trials, "
          f"wall / cpu): alg2 p50 {cost['alg2']['p50_ms']:.2f} / {cost['alg2']['cpu_p50_ms']:.2f}"
          f" ms, p99 {cost['alg2']['p99_ms']:.2f} / {cost['alg2']['cpu_p99_ms']:.2f} ms; exact "
          f"p50 {cost['exact']['p50_ms']:.2f} / {cost['exact']['cpu_p50_ms']:.2f} ms, p99 "
          f"{cost['exact']['p99_ms']:.2f} / {cost['exact']['cpu_p99_ms']:.2f} ms")
    r = cost["random_50x8_shortfall"]
    print(f"random 50x8 queues: Alg.2 short on {100 * r['short_fraction']:.0f}%, mean gap "
          f"{100 * r['mean_relative_gap']:.1f}%, max {100 * r['max_relative_gap']:.1f}%")
    run.write(args.out, json.loads(json.dumps(report, default=str)), settings=settings_of(args))
    png = args.out.with_suffix(".png")
    plot_otas(report, png)
    print(f"wrote {args.out} and {png}")
    return 0
