"""How much busy neighbours slow the model: a variant at one batch size (one torch thread)
alone, then beside N busy-loop processes (the live benchmark's co-located serving stack in its
simplest form; bench/experiments/coload/measure.py). Prints one line and writes JSON.

    .venv/bin/python -m bench coload --busy 1 --out results/coload.json
"""

from __future__ import annotations

from pathlib import Path

from bench.core.cli import experiment_parser, settings_of
from bench.core.result import Run
from bench.experiments.coload.measure import ColoadSettings, measure_coload
from deployments.models.cache import DEFAULT_MODELS_DIR


def main(argv: list[str] | None = None) -> int:
    p = experiment_parser(__doc__, out="results/coload.json")
    p.add_argument("--family", default="family")
    p.add_argument("--variant", default="family/cnn-xl")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--busy", type=int, default=1, help="busy-loop processes beside the model")
    p.add_argument("--models-dir", type=Path, default=DEFAULT_MODELS_DIR)
    a = p.parse_args(argv)
    run = Run()
    r = measure_coload(ColoadSettings(a.family, a.variant, a.batch, a.busy, a.models_dir))
    print(f"{r.variant} b={r.batch} p50 alone {r.alone_p50_ms:.1f} ms, beside {r.busy} busy "
          f"process(es) {r.loaded_p50_ms:.1f} ms: x{r.slowdown:.2f}")
    run.write(a.out, r.to_dict(), settings=settings_of(a))
    print(f"wrote {a.out}")
    return 0
