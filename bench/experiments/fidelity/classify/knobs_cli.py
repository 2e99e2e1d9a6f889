"""Simulator vs live for the three knobs: RAMSIS (model selection), OTAS (token
adaptation), MOSEL (modality selection), single requests at 1x and 2x the best static
configuration's live capacity, on two machine states (quiet, and one busy-loop neighbour).
Accuracy and violations, live vs predicted, each cell within 2 points (its check); table +
Result (--out) + plot (--png) (bench/experiments/fidelity/classify/knobs.py).

    # the live runs: six python -m bench adaptive-vs-static runs (~5-6 min each; take the machine lock)
    RAY_AUTH_MODE=disabled flock /tmp/live.lock .venv/bin/python -m bench fidelity knobs \\
        measure --runs results/knobs
    # the figure from their JSON (--resim: redo each run's simulator phase from its records)
    .venv/bin/python -m bench fidelity knobs --runs results/knobs [--resim]

Each bench_live run predicts its adaptive runs from its static configuration's ramp only (the
`simfront` source: the stack's CPU fitted on the ramp steps, the machine's neighbours measured
during each run, the front door's limiter and the policy run unchanged; bench/experiments/fidelity/classify/front_door.py).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from bench.core.cli import experiment_parser, settings_of
from bench.core.paths import REPO as ROOT
from bench.core.result import Run, all_ok
from bench.experiments.fidelity.classify.knobs import (
    KNOBS,
    STATES,
    bench_args,
    plot,
    read_cells,
    repeat_table,
    summary,
    table,
)
from bench.experiments.fidelity.compare import checks as comparison_checks


def _bench(args: list[str], experiment: tuple[str, ...] = ("adaptive-vs-static",)) -> int:
    cmd = [sys.executable, "-m", "bench", *experiment, *args]
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT, check=False).returncode


def measure(a: argparse.Namespace) -> int:
    a.runs.mkdir(parents=True, exist_ok=True)
    for state in a.states:
        for knob in a.knobs:
            rc = _bench(bench_args(knob, state, a.runs))
            if not (a.runs / f"{knob}_{state}.json").exists():
                print(f"{knob}/{state}: bench_live exited {rc} without its JSON", file=sys.stderr)
                return 1
    return 0


def figure(a: argparse.Namespace, argv: list[str]) -> int:
    run = Run()
    if a.resim:
        for state in a.states:
            for knob in a.knobs:
                name = a.runs / f"{knob}_{state}"
                if name.with_suffix(".json").exists():
                    _bench([f"{name}.json", "--records", str(name), "--out", f"{name}.json",
                            "--png", f"{name}.png"], ("fidelity", "adaptive-vs-static"))
    rows, sources = read_cells(a.runs, a.knobs, a.states)
    print(table(rows))
    out = {"command": " ".join(["python -m bench fidelity knobs", *argv]),
           **summary(rows, sources)}
    if a.again is not None:  # the same cells measured a second time: the live figure's spread
        again, _ = read_cells(a.again, a.knobs, a.states)
        text, out["live_again"] = repeat_table(rows, again)
        print("\nthe same cells measured again (live vs live):\n" + text)
    checks = comparison_checks(c for r in rows for c in r.comparisons())
    run.write(a.out, out, settings=settings_of(a), checks=checks)
    plot(rows, a.png)
    print(f"wrote {a.out} and {a.png}")
    return 0 if all_ok(checks) else 1


def main(argv: list[str] | None = None) -> int:
    p = experiment_parser(__doc__, out=ROOT / "docs/data_sim_live_knobs.json")
    p.add_argument("--runs", type=Path, default=Path("results/knobs"))
    p.add_argument("--knobs", nargs="+", default=list(KNOBS), choices=list(KNOBS))
    p.add_argument("--states", nargs="+", default=list(STATES), choices=list(STATES))
    p.add_argument("--resim", action="store_true", help="redo each run's simulator phase first")
    p.add_argument("--again", type=Path, default=None,
                   help="a second measure's directory: the live figure run to run, cell by cell")
    p.add_argument("--png", type=Path, default=ROOT / "docs/figures/sim_live_knobs.png")
    p.add_argument("cmd", nargs="?", choices=["figure", "measure"], default="figure",
                   help="measure: the live runs (needs the machine to itself); figure (default)")
    a = p.parse_args(argv)
    return measure(a) if a.cmd == "measure" else figure(
        a, list(sys.argv[1:] if argv is None else argv))
