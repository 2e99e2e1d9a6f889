"""What no load can fix: each system's TTFT on the figure's requests served one at a time (seed 001
§5.2's static allocation, docs/sim_generation.md "The zero-load floor"). The requests of
`python -m bench modserve`'s workload arrive 1,000 s apart, so none waits for another: a request
that misses its class's SLO here misses it at every load. Per model, system and images-per-request
exponent (P(n) ~ n^-exponent on 1..16 images per image-text request; the figure's is 2.0): the
P99 image count, each class's P99 TTFT against its SLO, the share of requests within their
class's SLO, and the most images a median-prompt request can carry within the SLO. Prints a
table, writes docs/data_sim_zero_load_floor.json.

    .venv/bin/python -m bench modserve-zero-load          # 30-60 s
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from app.sim.generation.experiment import (
    ATTAINMENT_TARGET,
    Setup,
    alone_ttft_ms,
    base_trace,
    make_setup,
    run_point,
)
from app.sim.generation.modserve_profiles import MODELS
from bench.core.cli import experiment_parser
from bench.core.paths import REPO as ROOT
from bench.core.result import Run

SYSTEMS = ("monolith", "modserve")
ALONE_RPS = 1e-3  # a request every 1,000 s: none overlaps another (the longest TTFT is ~12 s)
MAX_IMAGES = 16


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def floor_row(setup: Setup, system: str, exponent: float, requests: int,
              seed: int) -> dict[str, Any]:
    trace = base_trace(requests, 0.5, seed, exponent)
    s = run_point(setup, system, trace, ALONE_RPS)
    alone = {n: alone_ttft_ms(setup, system, n) for n in range(1, MAX_IMAGES + 1)}
    fits = [n for n, ms in alone.items() if ms <= setup.ttft_slo_ms]
    with_images = trace.num_images[trace.num_images > 0]
    return {
        "model": setup.model, "system": system, "images_exponent": exponent,
        "p99_images_per_image_request": float(np.quantile(with_images, 0.99,
                                                          method="inverted_cdf")),
        "share_of_requests_over_max_fit": float((trace.num_images > max(fits, default=0)).mean()),
        "max_images_within_slo": max(fits, default=0),
        "alone_ttft_ms_by_images": {str(n): round(ms, 1) for n, ms in alone.items()},
        "p99_text_ms": s.ttft_p99_text_ms, "p99_image_ms": s.ttft_p99_image_ms,
        "text_slo_ms": s.text_ttft_slo_ms, "image_slo_ms": s.ttft_slo_ms,
        "attainment": s.slo_attainment, "meets_p99": s.meets_slo,
        "meets_attainment": s.slo_attainment >= ATTAINMENT_TARGET}


def main(argv: list[str] | None = None) -> int:
    p = experiment_parser(__doc__, out=ROOT / "docs/data_sim_zero_load_floor.json", seed=1)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=sorted(MODELS))
    p.add_argument("--exponents", type=float, nargs="+", default=[2.0, 2.5, 3.0, 4.0])
    p.add_argument("--slo-factor", type=float, default=10.0)
    p.add_argument("--requests", type=int, default=8000)
    args = p.parse_args(argv)
    run = Run()
    t0 = time.time()
    rows = [floor_row(make_setup(model, args.slo_factor), system, e, args.requests, args.seed)
            for model in args.models for e in args.exponents for system in SYSTEMS]
    print(f"requests alone ({ALONE_RPS:g} req/s), SLO factor {args.slo_factor:g}, per class; "
          "'fits': most images a median-prompt request carries within the image-text SLO")
    print(f"{'model':16} {'system':9} {'exp':>4} {'P99 img':>7} {'fits':>4} {'over %':>6} "
          f"{'P99 text/SLO ms':>16} {'P99 image/SLO ms':>18} {'attain %':>8}  p99  attain")
    for r in rows:
        print(f"{r['model']:16} {r['system']:9} {r['images_exponent']:4.1f} "
              f"{r['p99_images_per_image_request']:7.0f} {r['max_images_within_slo']:4d} "
              f"{100 * r['share_of_requests_over_max_fit']:6.2f} "
              f"{r['p99_text_ms']:7.0f}/{r['text_slo_ms']:<8.0f} "
              f"{r['p99_image_ms']:8.0f}/{r['image_slo_ms']:<9.0f} "
              f"{100 * r['attainment']:8.2f}  {'yes' if r['meets_p99'] else 'no ':4} "
              f"{'yes' if r['meets_attainment'] else 'no'}")
    settings = {**vars(args), "out": _shown(args.out)}
    run.write(args.out, {"settings": settings, "seconds": round(time.time() - t0, 1),
                         "rows": rows}, settings=settings)
    print(f"wrote {_shown(args.out)} ({time.time() - t0:.0f} s)")
    return 0
