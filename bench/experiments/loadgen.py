"""Open-loop replay of a trace against a running server's /v1/classify (table + Result + PNG).

    python -m bench loadgen --url http://127.0.0.1:8000 --model family --qps 20 --slo-ms 200
"""

from __future__ import annotations

from app.sim.traces.spec import TRACES, TraceSpec
from bench.core.cli import experiment_parser
from bench.core.client import (
    LoadgenConfig,
    format_summary,
    payloads_from_model,
    run_load,
    trace_data_dir,
)
from bench.core.result import Run
from bench.core.run_report import plot_runs


def main(argv: list[str] | None = None) -> int:
    p = experiment_parser(__doc__, out="results/loadgen.json", seed=0)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--model", default="family", help="model family (GET /v1/models)")
    p.add_argument("--task", default=None, help="task of the family (default its first)")
    p.add_argument("--trace", default="poisson", choices=list(TRACES))
    p.add_argument("--qps", type=float, required=True,
                   help="rate (twitter: minimum with --peak-qps, else mean)")
    p.add_argument("--peak-qps", type=float, default=None, help="twitter: maximum rate")
    p.add_argument("--duration-s", type=float, default=60.0)
    p.add_argument("--slo-ms", type=float, required=True)
    p.add_argument("--min-accuracy", type=float, default=None)
    p.add_argument("--job-size", type=int, default=1, help=">1: send jobs of N items")
    p.add_argument("--timeout-s", type=float, default=None)
    p.add_argument("--examples", type=int, default=512, help="held-out examples to cycle")
    p.add_argument("--models-dir", default=None, help="weights cache (default: the registry's)")
    p.add_argument("--data-dir", default=None,
                   help="shared data directory, read by --trace twitter (default ../shared/data)")
    args = p.parse_args(argv)
    run = Run()
    trace = TraceSpec(args.trace, args.qps, args.duration_s, args.peak_qps, args.seed)
    cfg = LoadgenConfig(url=args.url, model=args.model, task=args.task, trace=trace,
                        slo_ms=args.slo_ms, min_accuracy=args.min_accuracy,
                        job_size=args.job_size, timeout_s=args.timeout_s,
                        data_dir=trace_data_dir(trace, args.data_dir))
    payloads = payloads_from_model(cfg, limit=args.examples, models_dir=args.models_dir)
    result = run_load(cfg, payloads)
    print(format_summary(result.summary))
    run.write(args.out, result.to_dict(), settings={k: str(v) for k, v in vars(args).items()})
    plot_runs({f"{cfg.model} {cfg.trace.kind}": result.series}, cfg.slo_ms,
              args.out.with_suffix(".png"))
    print(f"wrote {args.out} and {args.out.with_suffix('.png')}")
    return 0
