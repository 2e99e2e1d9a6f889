"""The generation simulator's one-day image-burst workload, plotted like ModServe's Figure 10
(requests/min and images/min per modality, prompt tokens/s), with its summary statistics
(docs/sim_workloads.md).

    .venv/bin/python -m bench chat-workload-plot [--mean-rps 10] [--seed 0]

Writes a Result (--out, default docs/figures/gen_workload.json: the statistics) and the figure
beside it (docs/figures/gen_workload.png).

The trace is app/sim/generation/workload.py's one_day_image_burst; the series and statistics
app/sim/generation/workload_summary.py's.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from app.sim.generation.workload import (
    LLAMA32_TOKENS_PER_IMAGE,
    generate_arrays,
    one_day_image_burst,
)
from app.sim.generation.workload_summary import TraceSummary, summarize, summary_stats
from bench.core.cli import experiment_parser, settings_of
from bench.core.result import Run


def plot(summary: TraceSummary, burst_h: tuple[float, float], out: Path) -> None:
    from bench.core.plot import pyplot, save

    plt = pyplot()

    hours = summary.bin_start_s / 3600.0
    fig, axes = plt.subplots(3, 1, figsize=(10, 8), sharex=True)
    axes[0].plot(hours, summary.text_only_rpm, label="text-only", lw=0.8)
    axes[0].plot(hours, summary.image_text_rpm, label="image-text", lw=0.8)
    axes[0].set_ylabel("requests / min")
    axes[1].plot(hours, summary.images_per_min, color="tab:orange", lw=0.8, label="image-text")
    axes[1].set_ylabel("images / min")
    axes[2].plot(hours, summary.text_only_prompt_tps, label="text-only", lw=0.8)
    axes[2].plot(hours, summary.image_text_prompt_tps, lw=0.8,
                 label=f"image-text (text + {summary.tokens_per_image} tokens/image)")
    axes[2].set_ylabel("prompt tokens / s")
    axes[2].set_xlabel("hour of the day")
    for ax in axes:
        ax.axvspan(*burst_h, color="grey", alpha=0.15)
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", fontsize=8)
    axes[0].set_title("One-day image-burst workload (grey: the image-driven burst)")
    save(fig, out, dpi=120)


def main(argv: list[str] | None = None) -> int:
    p = experiment_parser(__doc__, out="docs/figures/gen_workload.json", seed=0)
    p.add_argument("--mean-rps", type=float, default=10.0, help="requests/s outside the burst")
    p.add_argument("--image-share", type=float, default=0.2)
    p.add_argument("--tokens-per-image", type=int, default=LLAMA32_TOKENS_PER_IMAGE)
    args = p.parse_args(argv)
    run = Run()
    spec = one_day_image_burst(args.mean_rps, image_share=args.image_share,
                               tokens_per_image=args.tokens_per_image)
    started = time.perf_counter()
    trace = generate_arrays(spec, args.seed)
    generated_s = time.perf_counter() - started
    burst = spec.bursts[0]
    print(f"spec: text-only {spec.text_only}, image-text {spec.image_text}, burst {burst}")
    print(f"generated {len(trace)} requests in {generated_s:.2f} s (seed {args.seed})")
    stats = summary_stats(trace, tokens_per_image=args.tokens_per_image)
    print(json.dumps({k: round(v, 3) for k, v in stats.items()}, indent=1))
    png = args.out.with_suffix(".png")
    plot(summarize(trace, tokens_per_image=args.tokens_per_image),
         (burst.start_s / 3600.0, burst.end_s / 3600.0), png)
    run.write(args.out, {"requests": len(trace), "generated_s": round(generated_s, 2),
                         "burst_h": [burst.start_s / 3600.0, burst.end_s / 3600.0],
                         "stats": stats}, settings=settings_of(args))
    print(f"wrote {args.out} and {png}")
    return 0
