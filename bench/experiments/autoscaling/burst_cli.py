"""Token-throughput autoscaling live on this machine (docs/autoscaling.md): an image
burst scales the encoders up and back down while the LLM replicas stay put, and every request
is answered exactly once.

    RAY_AUTH_MODE=disabled flock /tmp/live.lock .venv/bin/python -m bench autoscaling-burst

serve_config.vlm.yaml's app (its coordinating `autoscaling_policy`, the cached VLM on vLLM, one
idle classifier) on a private local Ray with 2 logical CPUs, deployed from the config. Steady
text requests (--text-rps) for the whole run; during the burst (--burst-s, after --warm-s)
also chat requests with --images-per-request held-out digits each at --burst-rps; then quiet.
Replicas per stage (serve.status()) and the policy's decisions (/v1/status `autoscaling`)
sampled every second. Demo settings (bench/experiments/autoscaling/burst.py DemoScaling): Serve's replica
metrics pushed every 0.5 s (`metrics_interval_s`; Ray 2.60 reads that field, not
RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S), look-back 2 s, replicas' rate window
2 s, scale-down delay 10 s; an encoder said to carry --encoder-capacity image tokens/s (so that
a burst this 2-core machine can carry needs several), the LLM its stage profile's capacity
(or --llm-capacity).

Table + checks on stdout, a Result (--out; checks: every request answered once, the encoders
scaled up in the burst and back down after, the LLM replicas stayed put), figure (--figure), and
the run as a history JSON (--history-out) that serve_config.vlm.yaml's `generation.history`
sizes the next start from.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.core.cli import experiment_parser, settings_of
from bench.core.http import free_port
from bench.core.paths import REPO
from bench.core.result import Run, all_ok, checks_from_flags
from bench.experiments.autoscaling import burst_report as rep
from bench.experiments.autoscaling.burst import BurstSpec, DemoScaling, settings_json
from bench.experiments.autoscaling.burst_run import run_demo
from policies.autoscaling.history import history_to_json

TOKENS_PER_IMAGE = 16  # the shipped VLM's image_seq_length (checked against the run below)


RECORD_KEYS = ("index", "task", "num_images", "in_burst", "scheduled_s", "status", "http_status",
               "ttft_ms", "e2e_ms", "prompt_tokens", "completion_tokens")


def compact(record: Any) -> dict[str, Any]:
    """One request's outcome (no text, no token gaps: the JSON stays small)."""
    d = record.to_dict()
    out = {k: d[k] for k in RECORD_KEYS}
    out["correct"] = record.correct
    return out


def _parser() -> argparse.ArgumentParser:
    p = experiment_parser(__doc__, out=REPO / "docs" / "data_autoscale_burst.json", port=0,
                          config=REPO / "serve_config.vlm.yaml")
    s, d = BurstSpec(), DemoScaling()
    for name, value in asdict(s).items():
        p.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    p.add_argument("--encoder-capacity", type=float, default=d.encoder_capacity_per_s)
    p.add_argument("--llm-capacity", type=float, default=None,
                   help="default: the stage profile's (adaptserve profile --stages)")
    p.add_argument("--encoder-max", type=int, default=d.encoder_max)
    p.add_argument("--scale-down-delay-s", type=float, default=d.scale_down_delay_s)
    p.add_argument("--engine", default=d.engine, choices=("vllm", "transformers"))
    p.add_argument("--models-dir", type=Path, default=REPO / ".cache" / "models")
    p.add_argument("--model-dir", type=Path, default=None,
                   help="a VLM model directory to serve instead of the trained one in "
                        "--models-dir (the tests' tiny VLM)")
    p.add_argument("--num-cpus", type=int, default=2)
    p.add_argument("--figure", type=Path, default=REPO / "docs" / "figures" /
                   "autoscale_burst.png")
    p.add_argument("--history-out", type=Path,
                   default=REPO / ".cache" / "history" / "vlm.history.json")
    return p


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    result = Run()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    spec = BurstSpec(**{k: getattr(a, k) for k in asdict(BurstSpec())})
    scaling = DemoScaling(encoder_capacity_per_s=a.encoder_capacity,
                          llm_capacity_per_s=a.llm_capacity, encoder_max=a.encoder_max,
                          scale_down_delay_s=a.scale_down_delay_s, engine=a.engine)
    run = run_demo(spec, scaling, a.config, a.port or free_port(), a.num_cpus, a.models_dir,
                   model_dir=a.model_dir)
    rows = rep.series(run.samples, spec)
    sent = rep.sent_load(run.records, spec, TOKENS_PER_IMAGE)
    checks = rep.checks(rows, run.records, run.answered_by_server)
    print(f"deployed in {run.deploy_s:.0f} s; capacity/replica {run.capacities}")
    print(rep.table(rows))
    print(json.dumps(checks, indent=1))
    a.figure.parent.mkdir(parents=True, exist_ok=True)
    rep.plot(rows, sent, spec, a.figure, f"image burst {spec.burst_rps:g} req/s x "
             f"{spec.images_per_request} images, text {spec.text_rps:g} req/s")
    history = rep.history_of(run.records, TOKENS_PER_IMAGE, run.encode_latency_s)
    if history is not None:
        a.history_out.parent.mkdir(parents=True, exist_ok=True)
        a.history_out.write_text(json.dumps(history_to_json(
            history, 5.0, f"python -m bench autoscaling-burst run ({a.out.name})"), indent=1))
    judged = checks_from_flags({k: checks[k] for k in (
        "every_request_answered_once", "encoders_scaled_up_in_burst",
        "encoders_back_down_after", "llm_stayed_put")})
    result.write(a.out, {
        "command": " ".join(["python -m bench autoscaling-burst", *(argv or sys.argv[1:])]),
        **settings_json(spec, scaling), "capacities_per_replica": run.capacities,
        "deploy_s": round(run.deploy_s, 1), "checks": checks, "series": rows,
        "sent": sent, "encode_latency_s": run.encode_latency_s,
        "records": [compact(r) for r in run.records]}, settings=settings_of(a), checks=judged)
    print(f"wrote {a.out}, {a.figure}" + (f", {a.history_out}" if history else ""))
    return 0 if all_ok(judged) else 1
