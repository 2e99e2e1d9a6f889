"""The replica simulator with the front door beside a finished single-request run
(`python -m bench fidelity single-request --resim RUN.json`), without a live server and without Ray:

- the same traces: every ramp step and 1x/2x/3x run, its Poisson spec (rate, duration, seed)
  read from the run's per-run records file (`--records`, default the run's own);
- the same policy: the family's scheduler as the run's config builds it (profile, plan file);
- the front door: the proxy's `ConcurrencyLimiter` with the proxy's settings, unchanged;
- calibrated from the run's **ramp steps only** (never the 1x/2x/3x runs it predicts): the
  stack's CPU line (app/sim/replica/front_door.py) from their `cpu_ms_per_call` of the Serve
  processes and the load generator; the batch times the classifier measured in them
  (app/sim/replica/served.py); the stack time a call spends beyond its CPU share, at the
  lightest step. What each run's neighbours took of the machine (its CPU less the stack's) is
  that run's machine state, an input like its trace.

It prints live beside simulated attainment of admitted, goodput and refused share, and the
differences (points; goodput in percent).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from app.sim.replica.front_door import CpuSample, StackCpu, fit_stack_cpu
from app.sim.replica.request_metrics import RequestRecord, summarize
from app.sim.replica.served import ServedTimes
from app.sim.replica.sim import SchedulerSimConfig, simulate
from app.sim.traces.spec import TraceSpec, arrival_times
from bench.core import serve as lb
from bench.experiments.adaptive_vs_static.family import FamilySetup, family_setup
from bench.experiments.fidelity.compare import Comparison
from bench.experiments.single_request.metrics import FrontRun, front_run
from policies.admission import LimiterSettings
from policies.schedulers.base import Scheduler

MACHINE = "machine"  # cpu_ms_per_call's whole-machine entry; the others are the stack's

TOLERANCE_PTS = 2.0
GOODPUT_TOLERANCE = 0.1


@dataclass(frozen=True)
class LiveRun:
    """One run of the finished benchmark: its trace, records, wall time and CPU per call."""

    name: str
    spec: TraceSpec
    records: list[RequestRecord]
    wall_s: float
    cpu_ms: dict[str, float]  # per sent call, by process (MACHINE: the whole machine)

    @property
    def sent(self) -> int:
        return len(self.records)

    @property
    def admitted(self) -> int:
        return sum(1 for r in self.records if r.outcome not in ("refused", "shed"))

    def stack_ms(self) -> float:
        return sum(v for k, v in self.cpu_ms.items() if k != MACHINE)

    def sample(self) -> CpuSample:
        return CpuSample.from_run(self.stack_ms(), self.sent, self.admitted, self.wall_s)

    def neighbour_cores(self) -> float:
        """Cores the rest of the machine took during the run (0 without a machine figure)."""
        other_ms = self.cpu_ms.get(MACHINE, self.stack_ms()) - self.stack_ms()
        return max(0.0, other_ms * self.sent / self.wall_s / 1000.0)


def read_runs(out: dict[str, Any], records_dir: Path) -> list[LiveRun]:
    """The app's ramp steps and runs, in order, from their records files."""
    names = [r["name"] for r in (*out["app"]["ramp"], *out["app"]["runs"])]
    runs = []
    for name in names:
        d = json.loads((records_dir / f"{name}.json").read_text())
        runs.append(LiveRun(name, TraceSpec(**d["config"]["trace"]),
                            [RequestRecord(**r) for r in d["records"]], float(d["wall_s"]),
                            dict(out["cpu_ms_per_call"][name])))
    return runs


@dataclass(frozen=True)
class FrontCalibration:
    stack: StackCpu
    hops_ms: float  # stack time per call beyond the front stage, at the lightest step
    runs: list[str]
    served_records: list[RequestRecord]

    def to_dict(self) -> dict[str, Any]:
        return {"stack": self.stack.to_dict(), "hops_ms": self.hops_ms, "runs": self.runs}


def stack_ms_p50(records: Sequence[RequestRecord]) -> float:
    """p50 over ok answers of the time outside the replica's queue and batch: client latency
    less the batch and less the wait in the replica's queue (queue time after dispatch)."""
    times = [r.latency_ms - r.compute_ms - (r.queue_ms - r.dispatch_ms) for r in records
             if r.outcome == "ok" and r.latency_ms is not None and r.compute_ms is not None
             and r.queue_ms is not None and r.dispatch_ms is not None]
    if not times:
        raise ValueError("no ok answers with server timings to calibrate the stack time on")
    return float(np.median(times))


def calibrate(runs: Sequence[LiveRun], cores: float) -> FrontCalibration:
    """From the ramp steps (module doc)."""
    cal = [r for r in runs if "_ramp_" in r.name]
    if not cal:
        raise ValueError(f"no ramp steps among the runs {[r.name for r in runs]}")
    stack = fit_stack_cpu([r.sample() for r in cal], cores)
    light = cal[0]
    hops_ms = max(0.0, stack_ms_p50(light.records)
                  - stack.front_ms_per_call(light.neighbour_cores()))
    return FrontCalibration(stack, hops_ms, [r.name for r in cal],
                            [x for r in cal for x in r.records])


@dataclass(frozen=True)
class FrontSimSetup:
    """What every simulated run shares: the family, its scheduler, the base config."""

    family: FamilySetup
    scheduler: Callable[[], Scheduler]
    config: SchedulerSimConfig


def door_settings(out: dict[str, Any]) -> LimiterSettings:
    """The front door's settings the live run had (recorded in its JSON; runs from before they
    were recorded had the first defaults: window 32, 2 % late, x0.8, +1)."""
    recorded = out.get("front_door")
    if recorded is not None:
        return LimiterSettings(**recorded)
    return LimiterSettings(max_late_share=0.02, decrease=0.8, increase=0.0, window=32)


def sim_setup(out: dict[str, Any], cal: FrontCalibration, door: bool) -> FrontSimSetup:
    from app.builder import task_plan
    from deployments.classifier.policy_setup import build_task_policy

    s = out["settings"]
    args = lb.serve_args(Path(s["config"]))
    if s.get("policy"):
        args = lb.with_classifier(args, s["family"], policy=s["policy"])
    fam = family_setup(args, s["family"])
    c = fam.classifier
    plan = task_plan(c, fam.cfg.paths, fam.task)
    cfg = SchedulerSimConfig(
        replicas=c.num_replicas, slo_ms=float(s["slo_ms"]), routing="pow2", service="p50",
        max_batch_size=c.max_batch_size, overhead_ms=cal.hops_ms,
        load_window_s=fam.cfg.controller.window_s,
        max_ongoing=max(2 * c.max_queued_items, 64), max_queued_items=c.max_queued_items,
        task=fam.task, latency_feedback=c.latency_feedback,
        response_margin_ms=fam.cfg.http.response_margin_ms,
        front_door=door_settings(out) if door else None, seed=int(s["seed"]))
    return FrontSimSetup(fam, lambda: build_task_policy(c, fam.profile, plan).scheduler, cfg)


def simulate_run(run: LiveRun, setup: FrontSimSetup, cal: FrontCalibration,
                 seeds: int) -> FrontRun:
    """`seeds` simulations of the run's trace (batch-time samples differ), pooled."""
    others = run.neighbour_cores()
    cfg = replace(setup.config, front_ms_per_call=cal.stack.front_ms_per_call(others),
                  front_ms_per_refusal=cal.stack.front_ms_per_refusal(others))
    arrivals = arrival_times(run.spec)
    profile = setup.family.profile
    records: list[RequestRecord] = []
    for seed in range(cfg.seed, cfg.seed + seeds):
        served = ServedTimes(cal.served_records, profile, seed=seed)
        sim = simulate(profile, lambda _k: setup.scheduler(), arrivals, run.spec.duration_s,
                       replace(cfg, seed=seed), service_times=served)
        records += sim.records
    summary = summarize(records, seeds * run.spec.duration_s, cfg.slo_ms)
    return front_run(run.name, summary, records)


def _pts(a: float, b: float) -> float:
    return 100.0 * (a - b)


def compare(live: FrontRun, sim: FrontRun) -> dict[str, float]:
    """Simulated minus live: attainment of admitted and refused share in points, goodput in
    percent of live."""
    def share(r: FrontRun) -> float:
        return r.refused / r.sent if r.sent else 0.0
    return {"attainment_admitted_pts": _pts(sim.attainment_admitted, live.attainment_admitted),
            "refused_share_pts": _pts(share(sim), share(live)),
            "goodput_pct": (100.0 * (sim.goodput_qps / live.goodput_qps - 1.0)
                            if live.goodput_qps else float("nan"))}


def comparisons(result: dict[str, Any]) -> list[Comparison]:
    """Each run's attainment of admitted requests and refused share (points, within 2) and
    goodput (within 10% of live); the ramp steps are the calibration (shown, not judged)."""
    out = []
    for name, r in result["runs"].items():
        lv, sm = r["live"], r["sim"]

        def refused(x: dict[str, Any]) -> float:
            return 100.0 * x["refused"] / x["sent"] if x["sent"] else 0.0
        cal = "_ramp_" in name
        out += [Comparison("classify", name, "attainment admitted %",
                           100.0 * lv["attainment_admitted"], 100.0 * sm["attainment_admitted"],
                           TOLERANCE_PTS, calibration=cal),
                Comparison("classify", name, "refused %", refused(lv), refused(sm),
                           TOLERANCE_PTS, calibration=cal),
                Comparison("classify", name, "goodput /s", lv["goodput_qps"], sm["goodput_qps"],
                           GOODPUT_TOLERANCE, relative=True, calibration=cal)]
    return out


def resim(run_json: Path, records_dir: Path | None = None, seeds: int = 3,
          cores: float | None = None, door: bool = True) -> dict[str, Any]:
    """Simulate every run of a finished bench_front run (module doc)."""
    from bench.core.result import read_result

    out = read_result(run_json)["data"]  # a Result, or a bare record from before
    runs = read_runs(out, records_dir or Path(out["settings"]["records"]))
    ncores = float(cores or out.get("machine_cores") or os.cpu_count() or 1)
    cal = calibrate(runs, ncores)
    setup = sim_setup(out, cal, door)
    result: dict[str, Any] = {"run": str(run_json), "commit": out.get("commit"),
                              "front_door": door, "seeds": seeds,
                              "calibration": cal.to_dict(), "runs": {}}
    for run in runs:
        live = front_run(run.name, summarize(run.records, run.spec.duration_s,
                                             setup.config.slo_ms), run.records)
        sim = simulate_run(run, setup, cal, seeds)
        result["runs"][run.name] = {
            "live": live.to_dict(), "sim": sim.to_dict(), "diff": compare(live, sim),
            "neighbour_cores": run.neighbour_cores(),
            "front_ms_per_call": cal.stack.front_ms_per_call(run.neighbour_cores())}
    return result


def table(result: dict[str, Any]) -> str:
    """Live beside simulated, one line per run (att_adm and refused share in %, goodput /s,
    d: simulated minus live in points, goodput in %)."""
    head = (f"{'run':<12}{'offered':>8}{'nbr':>6}{'front':>7} | {'att_adm% live':>13}"
            f"{'sim':>7}{'d':>6} | {'goodput live':>12}{'sim':>7}{'d%':>6} | "
            f"{'refused% live':>13}{'sim':>7}{'d':>6} | {'p50 live':>8}{'sim':>6}")
    lines = [head]
    for name, r in result["runs"].items():
        lv, sm, d = r["live"], r["sim"], r["diff"]

        def ref(x: dict[str, Any]) -> float:
            return 100.0 * x["refused"] / x["sent"] if x["sent"] else 0.0
        lines.append(
            f"{name:<12}{lv['offered_qps']:>8.1f}{r['neighbour_cores']:>6.2f}"
            f"{r['front_ms_per_call']:>7.2f} | {100 * lv['attainment_admitted']:>13.1f}"
            f"{100 * sm['attainment_admitted']:>7.1f}{d['attainment_admitted_pts']:>6.1f} | "
            f"{lv['goodput_qps']:>12.1f}{sm['goodput_qps']:>7.1f}{d['goodput_pct']:>6.1f} | "
            f"{ref(lv):>13.1f}{ref(sm):>7.1f}{d['refused_share_pts']:>6.1f} | "
            f"{lv['p50_ms']:>8.0f}{sm['p50_ms']:>6.0f}")
    c = result["calibration"]
    st = c["stack"]
    lines.append(
        f"calibration ({', '.join(c['runs'])}): stack busy cores = {st['fixed_cores']:.2f} + "
        f"{st['call_ms']:.2f} ms x admitted/s + {st['refusal_ms']:.2f} ms x refused/s on "
        f"{st['cores']:g} cores; hops {c['hops_ms']:.1f} ms; nbr = neighbours' cores, front = "
        f"front-stage ms per call; {result['seeds']} seeds pooled")
    return "\n".join(lines)


def resim_main(argv: list[str]) -> int:
    from bench.core.cli import experiment_parser

    p = experiment_parser(__doc__, out=None)
    p.prog = "python -m bench fidelity single-request"
    p.add_argument("--resim", type=Path, required=True, help="a finished run's JSON")
    p.add_argument("--records", type=Path, default=None,
                   help="its per-run records (default: the run's own --records)")
    p.add_argument("--resim-seeds", type=int, default=3, help="simulations pooled per run")
    p.add_argument("--cores", type=float, default=None,
                   help="the machine's cores (default: the JSON's, else this machine's)")
    p.add_argument("--no-door", dest="door", action="store_false",
                   help="simulate without the proxy's limit (runs of code before it)")
    a = p.parse_args(argv)
    from bench.core.cli import settings_of
    from bench.core.result import Run
    from bench.core.run_report import clean
    from bench.experiments.fidelity.compare import checks
    from bench.experiments.fidelity.compare import table as comparison_table

    run = Run()
    result = resim(a.resim, a.records, a.resim_seeds, a.cores, a.door)
    rows = comparisons(result)
    print(table(result) + "\n\n" + comparison_table(rows))
    if a.out is None:
        return 0
    return run.finish(a.out, clean(result), settings=settings_of(a), checks=checks(rows))
