"""The generation simulator against the live system (docs/sim_generation.md, "Fidelity to the
live system"): the live runs of the generation benchmark rebuilt in the simulator
(bench/experiments/fidelity/generation/live_path.py) with this machine's stage profile, the live path's costs measured
at the lowest load only, every other load predicted.

    # the figure: table + docs/data_sim_live_fidelity.json + docs/figures/sim_live_fidelity.png
    .venv/bin/python -m bench fidelity generation \\
        --run docs/data_generation.json=/tmp/gb2/results/generation/records \\
        --run docs/data_sim_live_run.json=results/sim_live/records
    # a dedicated live run with CPU accounting per process (the machine lock; ~9 min)
    RAY_AUTH_MODE=disabled flock /tmp/live.lock .venv/bin/python -m bench fidelity generation \\
        measure --systems monolith full --rates 4 16 28

`--run JSON=RECORDS`: a benchmark's JSON (python -m bench generation-systems's, or `measure`'s) and the
directory of its per-request records (`<system>_<rate>.jsonl`, bench/experiments/generation_systems/run.py `_save`).
`--burst` (default docs/data_autoscale_burst.json, when it exists): the autoscaling burst demo
replayed in the simulator (replica counts over time). Each JSON read may be a Result or a bare
record from before; the figure is written as a Result (--out), its plot to --png.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from bench.core.cli import experiment_parser, settings_of
from bench.core.paths import REPO as ROOT
from bench.core.result import Run, read_result
from bench.experiments.fidelity.compare import checks
from bench.experiments.fidelity.compare import table as comparison_table
from bench.experiments.fidelity.generation.burst import burst_replay
from bench.experiments.fidelity.generation.fit import comparisons, fit_run, live_only
from bench.experiments.fidelity.generation.measure import measure
from bench.experiments.fidelity.generation.report import plot, run_to_run, summary, table

log = logging.getLogger("sim_live_fidelity")


def fit_main(a: argparse.Namespace) -> int:
    from bench.workloads.chat_payloads import example_pool
    from profiling.stages import load_stage_profiles

    profiles = load_stage_profiles(a.profile)
    run = Run()
    measured = read_result(a.measured)["data"] if a.measured.is_file() else None
    pool = None if a.no_workload_check else example_pool()
    runs = []
    for spec in a.run:
        run_json, _, records = spec.partition("=")
        runs.append(fit_run(Path(run_json), Path(records), profiles, measured, pool))
    extra = []
    for spec in a.also_live:
        run_json, _, records = spec.partition("=")
        extra.append(live_only(Path(run_json), Path(records)))
    burst = demo = None
    if a.burst.is_file():
        demo = read_result(a.burst)["data"]
        costs = next((run["calibration"]["full"]["path_costs"] for run in reversed(runs)
                      if "full" in run["calibration"]), None)
        if costs is not None:
            from bench.experiments.fidelity.generation.live_path import PathCosts

            burst = burst_replay(demo, profiles, PathCosts(**costs), warmup=False)
            burst["with_warmup"] = burst_replay(demo, profiles, PathCosts(**costs),
                                                warmup=True)["compare"]
    print(table(runs))
    out = {"command": " ".join(["python -m bench fidelity generation", *a.argv]),
           "profile": str(a.profile), "measured": str(a.measured) if measured else None,
           "runs": runs, "summary": summary(runs),
           "live_only_runs": [{k: v for k, v in x.items() if k != "rows"} for x in extra],
           "run_to_run": run_to_run(runs + extra),
           "burst": burst}
    if burst:
        print("\nburst demo replayed:", json.dumps(burst["compare"], indent=1))
        print("with the warm-up requests:", json.dumps(burst["with_warmup"]["encoder"]))
        print("TTFT ms:", burst["ttft_ms"])
    print("\nrun to run:", json.dumps(out["run_to_run"], indent=1))
    print("summary:", out["summary"])
    rows = comparisons(runs)
    print("\n" + comparison_table(rows))
    plot(runs, burst, demo, a.png)
    return run.finish(a.out, out,  # strict JSON: inf (no first token) is null
                      settings=settings_of({k: v for k, v in vars(a).items() if k != "argv"}),
                      checks=checks(rows), also=(a.png,))


def _parser() -> argparse.ArgumentParser:
    p = experiment_parser(__doc__, out=ROOT / "docs/data_sim_live_fidelity.json")
    p.add_argument("--run", action="append", default=[], metavar="JSON=RECORDS",
                   help="a live run and its per-request records (repeatable)")
    p.add_argument("--also-live", action="append", default=[], metavar="JSON=RECORDS",
                   help="another live run of the same workload, for the live P99's run-to-run "
                        "spread only (repeatable)")
    p.add_argument("--measured", type=Path, default=ROOT / "docs/data_sim_live_run.json",
                   help="the `measure` run's CPU accounting")
    p.add_argument("--profile", type=Path, default=ROOT / "docs/data_stage_profile.json")
    p.add_argument("--burst", type=Path, default=ROOT / "docs/data_autoscale_burst.json")
    p.add_argument("--png", type=Path, default=ROOT / "docs/figures/sim_live_fidelity.png")
    p.add_argument("--no-workload-check", action="store_true",
                   help="skip rebuilding the workloads from the runs' settings (25 s)")
    sub = p.add_subparsers(dest="cmd")
    m = sub.add_parser("measure", help="a live run with CPU accounting (needs the lock)")
    m.add_argument("--systems", nargs="+", default=["monolith", "full"])
    m.add_argument("--rates", type=float, nargs="+", default=[4.0, 16.0, 28.0])
    m.add_argument("--duration-s", type=float, default=25.0)
    m.add_argument("--idle-s", type=float, default=15.0)
    m.add_argument("--base-port", type=int, default=8350)
    m.add_argument("--like", type=Path, default=ROOT / "docs/data_generation.json",
                   help="the benchmark run whose settings and workload to repeat")
    m.add_argument("--results", type=Path, default=Path("results/sim_live"))
    m.add_argument("--out", type=Path, default=ROOT / "docs/data_sim_live_run.json")
    return p


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(message)s")
    logging.getLogger("bench").setLevel(logging.INFO)
    log.setLevel(logging.INFO)
    a = _parser().parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)
    if a.cmd == "measure":
        return measure(a)
    if not a.run:
        a.run = [f"{ROOT / 'docs/data_generation.json'}=results/generation/records"]
    return fit_main(a)
