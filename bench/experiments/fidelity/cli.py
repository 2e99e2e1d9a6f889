"""`python -m bench fidelity <target>`: the simulator against the live server, both paths, one
comparison (bench/experiments/fidelity/compare.py): every target reads finished live runs (or
measures them: `knobs measure`, `generation measure`), simulates them with the same policy code,
and writes a Result whose checks are its `Comparison`s, each figure live vs predicted within its
tolerance.

    python -m bench fidelity knobs [--runs DIR] ...          classify: RAMSIS, OTAS, MOSEL at 1x
                                                             and 2x, two machine states
    python -m bench fidelity single-request --resim RUN.json classify: a single-request run's
                                                             1x/2x/3x behind the front door
    python -m bench fidelity adaptive-vs-static RUN.json     classify: an adaptive-vs-static
                                                             run's simulator phase, redone
    python -m bench fidelity generation [--run JSON=RECORDS] generation: the chat path's P99
                                                             TTFT per system and rate, the burst

`python -m bench fidelity <target> --help` gives each target's flags.
"""

from __future__ import annotations

import importlib
import sys

# target -> module whose main(argv) runs it
TARGETS: dict[str, str] = {
    "knobs": "bench.experiments.fidelity.classify.knobs_cli",
    "single-request": "bench.experiments.fidelity.classify.single_request",
    "adaptive-vs-static": "bench.experiments.fidelity.classify.resim",
    "generation": "bench.experiments.fidelity.generation.cli",
}
MAIN = {"single-request": "resim_main"}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if args else 2
    target, rest = args[0], args[1:]
    if target not in TARGETS:
        print(f"unknown fidelity target {target!r}; targets: {', '.join(TARGETS)}",
              file=sys.stderr)
        return 2
    module = importlib.import_module(TARGETS[target])
    return int(getattr(module, MAIN.get(target, "main"))(rest) or 0)
