"""`adaptserve profile`: measure the model families on this machine and write profile JSONs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.cli.profile_stages import add_stage_arguments, cmd_profile_stages
from deployments.models.cache import DEFAULT_MODELS_DIR
from policies.profile import LatencyPoint, Profile
from profiling.paths import DEFAULT_PLANS_DIR, DEFAULT_PROFILES_DIR

DEFAULT_MODELS = "vit,fusion,family"


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _point(profile_points: tuple[LatencyPoint, ...], batch_size: int) -> LatencyPoint | None:
    return next((p for p in profile_points if p.batch_size == batch_size), None)


def profile_table(profiles: list[Profile], batch_sizes: tuple[int, int] = (1, 16)) -> str:
    """Variant, accuracy and p50/p95 ms at two batch sizes, one block per profile."""
    b1, b2 = batch_sizes
    header = (f"{'profile':<16}{'variant':<26}{'accuracy':>9}"
              f"{f'p50@{b1}':>10}{f'p95@{b1}':>10}{f'p50@{b2}':>10}{f'p95@{b2}':>10}")
    lines = [header]
    for prof in profiles:
        for vp in prof.variants:
            cells = []
            for b in (b1, b2):
                p = _point(vp.latency, b)
                cells += [f"{p.p50_ms:10.2f}", f"{p.p95_ms:10.2f}"] if p else [f"{'-':>10}"] * 2
            lines.append(f"{prof.name:<16}{vp.variant.name:<26}{vp.accuracy:9.4f}{''.join(cells)}")
    return "\n".join(lines)


def cmd_profile(args: argparse.Namespace) -> int:
    if args.stages:
        return cmd_profile_stages(args)
    from profiling.artifacts import ensure_profiles, load_profile

    measure: dict[str, Any] = {"warmup": args.warmup, "repeats": args.repeats,
                               "min_time_s": args.min_time_s, "device": args.device}
    batch_sizes = [int(b) for b in _csv(args.batch_sizes)]
    paths = ensure_profiles(_csv(args.models), args.models_dir, args.out, args.force,
                            tasks=_csv(args.tasks) if args.tasks else None,
                            batch_sizes=batch_sizes, threads=args.threads, progress=True,
                            **measure)
    profiles = [load_profile(p) for p in paths.values()]
    shown = (min(batch_sizes), 16 if 16 in batch_sizes else max(batch_sizes))
    print(profile_table(profiles, shown))
    if profiles:
        meta = profiles[0].metadata
        print(f"hardware {profiles[0].hardware}, torch {meta.get('torch')}, "
              f"threads {meta.get('threads')}, load avg (1 min) {meta.get('load_avg_1m')}")
    for name, path in paths.items():
        print(f"  {name}: {path}")
    if args.plans:
        from profiling.plans import PlanSettings, ensure_plans

        settings = PlanSettings(slo_s=args.slo_ms / 1000, num_workers=args.workers,
                                percentile=args.percentile, max_batch_size=args.plan_max_batch)
        kinds = _csv(args.plan_kinds) if args.plan_kinds else None
        plans = ensure_plans(paths, args.plans_dir, settings, kinds, force=args.force)
        print(f"{len(plans)} plans (SLO {args.slo_ms:g} ms, {args.workers} workers):")
        for name, path in plans.items():
            print(f"  {name}: {path}")
    return 0


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register `profile` on the `adaptserve` subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "profile", help="measure model families on this machine -> profile JSONs")
    p.add_argument("--models", default=DEFAULT_MODELS, help="comma list of registry names")
    p.add_argument("--tasks", default=None,
                   help="comma list of tasks (default: every task of each model)")
    p.add_argument("--out", type=Path, default=DEFAULT_PROFILES_DIR)
    p.add_argument("--models-dir", type=Path, default=DEFAULT_MODELS_DIR)
    p.add_argument("--batch-sizes", default="1,2,4,8,16,32")
    p.add_argument("--threads", type=int, default=1, help="torch threads, as a replica pins")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=30, help="most timed calls per point")
    p.add_argument("--min-time-s", type=float, default=0.3,
                   help="stop timing a point after this much work (and >= 5 calls)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--force", action="store_true", help="re-measure (and re-plan) even if current")
    p.add_argument("--plans", action="store_true",
                   help="also build the scheduler plans of each profile (profiling/plans.py)")
    p.add_argument("--plans-dir", type=Path, default=DEFAULT_PLANS_DIR)
    p.add_argument("--slo-ms", type=float, default=200.0, help="SLO the plans are built for")
    p.add_argument("--workers", type=int, default=1, help="replicas the plans are built for")
    p.add_argument("--percentile", default="p95", choices=["mean", "p50", "p95", "p99"])
    p.add_argument("--plan-max-batch", type=int, default=8, help="largest batch a replica runs")
    p.add_argument("--plan-kinds", default=None,
                   help="comma list of ramsis,jellyfish,mosel,otas (default: all a profile fits)")
    add_stage_arguments(p)
    p.set_defaults(func=cmd_profile)
    return p
