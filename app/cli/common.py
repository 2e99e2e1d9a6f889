"""Arguments and inputs shared by `adaptserve plan` and `python -m bench ramsis`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from policies.profile import LatencyModel, Profile


def add_common_args(p: argparse.ArgumentParser, out: bool = True) -> None:
    """The RAMSIS inputs' flags; `out=False` leaves `--out` to the caller (an experiment's
    shared flag, bench/core/cli.py)."""
    p.add_argument("--task", default="image", choices=["image", "text"],
                   help="RAMSIS task whose public profiles to use (ignored with --profile)")
    p.add_argument("--profile", help="a profile JSON of ours instead of the RAMSIS profiles")
    p.add_argument("--data-dir", help="shared data directory (default ../shared/data)")
    p.add_argument("--percentile", default="p95", choices=["mean", "p50", "p95", "p99"])
    p.add_argument("--max-batch", type=int, default=32)
    p.add_argument("--slo-ms", type=float, default=150.0)
    p.add_argument("--workers", type=int, default=60)
    if out:
        p.add_argument("--out", type=Path, default=Path("results"))


def shared_data(args: argparse.Namespace) -> Path:
    """The shared data directory (--data-dir, else the default), checked to exist; resolved
    only by the commands that read it, so that --profile runs need none."""
    from profiling.paths import shared_data_dir

    return shared_data_dir(args.data_dir)


def latency_model(args: argparse.Namespace) -> LatencyModel:
    """--profile's latency model, else the RAMSIS public profiles of --task."""
    if args.profile:
        profile = Profile.from_dict(json.loads(Path(args.profile).read_text()))
    else:
        from app.sim.ramsis.data import load_ramsis_profile

        profile = load_ramsis_profile(args.task, data_dir=shared_data(args))
    return LatencyModel.from_profile(profile, args.percentile, args.max_batch)
