"""`adaptserve plan`: profiles -> RAMSIS policy files, one per load of the range."""

from __future__ import annotations

import argparse
from typing import Any

from app.cli.common import add_common_args, latency_model


def cmd_plan(args: argparse.Namespace) -> int:
    from app.sim.ramsis.planning import plan_policy_set
    from app.sim.report import write_json
    from policies.model_selection.mdp_spec import MDPSpec

    model = latency_model(args)
    base = MDPSpec(args.slo_ms / 1000, args.workers, args.min_qps)
    tables = plan_policy_set(base, model, args.min_qps, args.max_qps, args.step_qps,
                             cache_dir=args.out / "cache", progress=True)
    for t in tables:
        write_json(args.out / f"ramsis_W{args.workers}_{args.slo_ms:g}ms_{t.load_qps:g}qps.json",
                   t.to_dict())
    print(f"{len(tables)} policies -> {args.out}")
    for t in tables:
        print(f"  {t.load_qps:8.1f} QPS  E[acc] {t.expected_accuracy:.4f}  "
              f"E[viol] {t.expected_violation:.5f}")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `plan` on the `adaptserve` subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser("plan",
                                                       help="profiles -> RAMSIS policy files")
    add_common_args(p)
    p.add_argument("--min-qps", type=float, default=200.0)
    p.add_argument("--max-qps", type=float, default=4000.0)
    p.add_argument("--step-qps", type=float, default=400.0)
    p.set_defaults(func=cmd_plan)
    return p
