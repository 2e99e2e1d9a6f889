"""How long one autoscaling decision takes (target: p99 under 1 ms of CPU time; Serve's
controller runs the policies every 0.1 s): the deployment policy (StagePolicy) and the application policy
(CoordinatedPolicy: encoder + LLM coordinated, a classifier alone), each resolved from its
AutoscalingPolicy and wrapped exactly as Serve's controller does (Ray Serve 2.60's
_resolve_policy_callable + _apply_autoscaling_config / _apply_app_level_autoscaling_config),
called on Serve's own AutoscalingContext objects built like the controller builds them (fresh
each tick, lazily computed metrics, a copy of the policy state), the clock advancing 0.1 s a
call through a load that rises, bursts and falls (every branch: up, hold, down, steady). The
decision records go to the publisher as in production (its thread does nothing without Ray).

    .venv/bin/python -m bench autoscaling-decision [--calls 10000]

Only the policy call is timed (the context is Serve's cost, built before the clock starts),
by the wall clock and by the thread's CPU time (the wall clock's tail on a shared, loaded
machine is mostly the call being descheduled; the CPU time is what the call costs).
Table on stdout, a Result to --out (docs/data_autoscaling_decision.json): one check per policy
call and clock, p99 < 1 ms, judged on the CPU time (the wall clock's reported beside it).
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import sys
import time
from typing import Any

from ray.serve._private.autoscaling_state import _resolve_policy_callable
from ray.serve._private.common import DeploymentID, ReplicaID
from ray.serve.autoscaling_policy import (
    _apply_app_level_autoscaling_config,
    _apply_autoscaling_config,
)
from ray.serve.config import (
    AutoscalingConfig,
    AutoscalingContext,
    AutoscalingPolicy,
)

from bench.core.cli import experiment_parser, settings_of
from bench.core.paths import REPO
from bench.core.result import Check, Run, all_ok

HOOKS = "deployments.autoscaling.serve_hooks"
APP = "adaptserve"
KW = {"encoder": {"stage": "encoder", "capacity_per_s": 100.0, "startup_s": 3.0,
                  "scale_down_delay_s": 10.0},
      "llm": {"stage": "llm", "capacity_per_s": 2000.0, "startup_s": 45.0,
              "architecture": "decoder_only"},
      "classifier": {"stage": "classifier", "capacity_per_s": 140.0, "unit": "items/s"}}
NAMES = {"encoder": "ImageEncoder", "llm": "LLMBackend", "classifier": "Classifier_family"}


def config(stage: str) -> AutoscalingConfig:
    return AutoscalingConfig(
        min_replicas=1, max_replicas=8, upscale_delay_s=0.0, downscale_delay_s=0.0,
        policy=AutoscalingPolicy(policy_function=f"{HOOKS}:StagePolicy",
                                 policy_kwargs=KW[stage]))


def load_at(t_s: float) -> float:
    """Image tokens/s: a base, a rise, a burst and a fall (a 60 s cycle)."""
    phase = t_s % 60.0
    return 40.0 + (500.0 if 20 <= phase < 35 else 0.0) + 20.0 * math.sin(t_s)


def metrics(stage: str, n: int, t_s: float) -> dict[str, dict[Any, float]]:
    load = load_at(t_s)
    per = {"encoder": {"image_tokens_per_s": load, "slo_attainment": 1.0},
           "llm": {"text_tokens_per_s": 150.0, "image_tokens_per_s": load},
           "classifier": {"items_per_s": 90.0, "queue_len": 2.0, "load_qps": 90.0}}[stage]
    dep = DeploymentID(NAMES[stage], APP)
    replicas = [ReplicaID(f"{stage}-{i}", dep) for i in range(n)]
    return {m: {r: v / n for r in replicas} for m, v in per.items()}


def context(stage: str, cfg: AutoscalingConfig, target: int, t_s: float,
            state: dict[str, Any]) -> AutoscalingContext:
    dep = DeploymentID(NAMES[stage], APP)
    running = max(1, target)
    agg = metrics(stage, running, t_s)
    return AutoscalingContext(
        deployment_id=dep, deployment_name=dep.name, app_name=APP,
        current_num_replicas=running, target_num_replicas=target,
        running_replicas=[ReplicaID(f"{stage}-{i}", dep) for i in range(running)],
        total_num_requests=lambda: 4.0, total_queued_requests=lambda: 0.0,
        aggregated_metrics=lambda: agg, raw_metrics=lambda: {},
        capacity_adjusted_min_replicas=1, capacity_adjusted_max_replicas=8,
        policy_state=dict(state), last_scale_up_time=None, last_scale_down_time=None,
        current_time=1_000_000.0 + t_s, config=cfg)


def bench_deployment(calls: int, clock: Any = time.perf_counter_ns) -> list[float]:
    cfg = config("encoder")
    policy = _apply_autoscaling_config(_resolve_policy_callable(cfg.policy))
    target, state, out = 1, {}, []
    for i in range(calls):
        ctx = context("encoder", cfg, target, i * 0.1, state)
        t = clock()
        target, state = policy(ctx)
        out.append((clock() - t) / 1e6)
    return out


def bench_application(calls: int, clock: Any = time.perf_counter_ns) -> list[float]:
    cfgs = {s: config(s) for s in KW}
    app = AutoscalingPolicy(policy_function=f"{HOOKS}:CoordinatedPolicy")
    policy = _apply_app_level_autoscaling_config(_resolve_policy_callable(app))
    ids = {s: DeploymentID(NAMES[s], APP) for s in KW}
    targets = {s: 1 for s in KW}
    states: dict[Any, dict[str, Any]] = {}
    out = []
    for i in range(calls):
        ctxs = {ids[s]: context(s, cfgs[s], targets[s], i * 0.1, states.get(ids[s], {}))
                for s in KW}
        t = clock()
        decisions, states = policy(ctxs)
        out.append((clock() - t) / 1e6)
        targets = {s: decisions.get(ids[s], targets[s]) for s in KW}
    return out


def summary(ms: list[float]) -> dict[str, float]:
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return {"calls": len(ms), "p50_ms": round(q[49], 4), "p99_ms": round(q[98], 4),
            "max_ms": round(max(ms), 4), "mean_ms": round(statistics.mean(ms), 4)}


def main(argv: list[str] | None = None) -> int:
    p = experiment_parser(__doc__, out=REPO / "docs" / "data_autoscaling_decision.json")
    p.add_argument("--calls", type=int, default=10_000)
    p.add_argument("--warmup", type=int, default=500)
    a = p.parse_args(argv)
    run = Run()
    bench_deployment(a.warmup)
    bench_application(a.warmup)
    load = round(os.getloadavg()[0], 2)
    rows = {}
    for clock_name, clock in (("wall", time.perf_counter_ns), ("thread CPU", time.thread_time_ns)):
        rows[f"deployment policy (encoder), {clock_name}"] = summary(
            bench_deployment(a.calls, clock))
        rows[f"application policy (encoder + LLM + classifier), {clock_name}"] = summary(
            bench_application(a.calls, clock))
    print("| policy call, clock | calls | p50 ms | p99 ms | max ms |\n|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['calls']} | {r['p50_ms']} | {r['p99_ms']} | {r['max_ms']} |")
    ok = all(r["p99_ms"] < 1.0 for name, r in rows.items() if name.endswith("thread CPU"))
    wall_ok = all(r["p99_ms"] < 1.0 for name, r in rows.items() if name.endswith("wall"))
    print(f"p99 under 1 ms: CPU time {ok}, wall clock {wall_ok} (load average {load} at the "
          f"start on {os.cpu_count()} cores)")
    # judged on the CPU time; the wall clock's tail is the machine's load (reported, not judged)
    checks = [Check(f"p99 {name}", r["p99_ms"], "< 1 ms",
                    r["p99_ms"] < 1.0 if name.endswith("thread CPU") else None)
              for name, r in rows.items()]
    run.write(a.out, {
        "command": " ".join(["python -m bench autoscaling-decision", *(argv or sys.argv[1:])]),
        "rows": rows, "p99_under_1ms_cpu": ok, "p99_under_1ms_wall": wall_ok,
        "python": platform.python_version(), "cpu_count": os.cpu_count(),
        "load_avg_1m_start": load, "load_avg_1m_end": round(os.getloadavg()[0], 2)},
        settings=settings_of(a), checks=checks)
    print(f"wrote {a.out}")
    return 0 if all_ok(checks) else 1
