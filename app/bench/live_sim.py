"""Phase 4 of the live benchmark: the scheduler simulator on the same profile, plan files,
traces and seeds as the live runs, two ways:

- "sim": batch times from the profile (the model alone on an idle core) and a constant stack
  time per call (p50 at light load);
- "simcal": batch and stack times as the live server measured them in calibration runs, never
  in the runs it predicts (app/sim/replica/served.py): the ramp steps at and past the static
  configuration's capacity (the best-goodput step and the ones after it), the machine's state
  nearest the predicted load (stack times grow with load; the light steps understate them).
  Its figures pool `sim_seeds` runs (service and stack samples).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from app.bench.live_family import FamilySetup, family_setup
from app.bench.live_report import SIM_KINDS, hops_p50_ms
from app.bench.live_settings import BenchConfigs, LiveBenchSettings
from app.bench.loadgen import trace_data_dir
from app.sim.replica.request_metrics import LoadSummary, RequestRecord, summarize, timeseries
from app.sim.replica.served import CallTiming, ServedTimes, StackDelays, call_timings
from app.sim.replica.sim import SchedulerSimConfig, simulate
from app.sim.traces.spec import TraceSpec, arrival_times
from policies.profile import Profile

if TYPE_CHECKING:
    from deployments.classifier.config import ClassifierConfig
    from policies.schedulers.plan_types import Plan


@dataclass(frozen=True)
class RecordedRun:
    """What a live run left: one record per item, and its time series."""

    records: list[RequestRecord]
    series: dict[str, Any]


@dataclass(frozen=True)
class SimPhaseInputs:
    runs: Mapping[str, RecordedRun]  # by run name
    ramp: list[dict[str, Any]]  # the capacity ramp's steps
    spec_2x: TraceSpec
    spec_1x: TraceSpec | None  # None: a run from before the 1x run existed
    configs: BenchConfigs
    k: int
    slo_ms: float


@dataclass(frozen=True)
class SimPhaseResult:
    inputs: dict[str, Any]  # what the simulator was fed (docs/data_live.json "sim_inputs")
    summaries: dict[str, LoadSummary]  # "<kind>_<run>"
    series: dict[str, Any]  # "<kind> <run>": the first seed's time series


@dataclass(frozen=True)
class Calibration:
    hops_ms: float  # time outside the replica per call at light load
    runs: list[str]  # the calibration runs
    records: list[RequestRecord]  # their records
    served_records: list[RequestRecord]  # + the adaptive warm-up's, for the other variants
    timings: list[CallTiming]


@dataclass(frozen=True)
class Predicted:
    name: str
    args: dict[str, Any]
    spec: TraceSpec


def calibration(settings: LiveBenchSettings, inputs: SimPhaseInputs) -> Calibration:
    runs, steps = inputs.runs, inputs.ramp
    # time outside the replica, per call, at light load with the runs' job size (the first
    # ramp step); single-item light runs understate it for jobs (decode, transfer, response)
    hops_ms = hops_p50_ms(runs["ramp_0" if settings.job_size > 1 else "light_app"].records)
    best_step = max(range(len(steps)), key=lambda i: steps[i]["goodput_qps"])
    names = [f"ramp_{i}" for i in range(best_step, len(steps))]
    records = [r for n in names for r in runs[n].records]
    # batch times of the variants the static ramp never runs: from the adaptive warm-up
    seen = {r.variant for r in records}
    served = records + [r for r in runs["warmup_adaptive"].records if r.variant not in seen]
    return Calibration(hops_ms, names, records, served, call_timings(records))


def _sim_inputs(settings: LiveBenchSettings, cal: Calibration,
                setup: FamilySetup) -> dict[str, Any]:
    served = ServedTimes(cal.served_records, setup.profile, seed=settings.seed)
    return {"hops_p50_ms": cal.hops_ms, "service": settings.sim_service,
            "calibration_runs": cal.runs + ["warmup_adaptive (other variants)"],
            "calibration_calls": len(cal.timings),
            "sim_seeds": settings.sim_seeds, "served_factor": served.factor,
            "served_pairs": sorted(f"{v}@{n}" for v, n in served.samples),
            "stack_p50_ms": StackDelays(cal.timings).p50_total_ms()}


def _predicted(settings: LiveBenchSettings, inputs: SimPhaseInputs) -> list[Predicted]:
    adaptive = settings.policy
    out = [Predicted("static_2x", inputs.configs.static_args, inputs.spec_2x),
           Predicted(f"{adaptive}_2x", inputs.configs.adapt_args, inputs.spec_2x)]
    if inputs.spec_1x is not None and f"{adaptive}_1x" in inputs.runs:
        out.insert(1, Predicted(f"{adaptive}_1x", inputs.configs.adapt_args, inputs.spec_1x))
    return out


@dataclass(frozen=True)
class RunPolicy:
    """The scheduler config a predicted run deploys and the plan file its replicas read."""

    classifier: ClassifierConfig
    plan: Plan | None

    def scheduler(self, profile: Profile) -> Any:
        from deployments.classifier.policy_setup import build_task_policy

        return build_task_policy(self.classifier, profile, self.plan).scheduler


def _run_policy(run: Predicted, setup: FamilySetup, family: str) -> RunPolicy:
    from app.builder import ensure_artifacts, load_config, task_plan

    run_cfg = load_config(run.args)
    # the plan file must be this config's (a no-op right after the live runs; --resim may
    # follow other deployments that rewrote it)
    ensure_artifacts(run_cfg)
    c = run_cfg.classifier(family)
    return RunPolicy(c, task_plan(c, setup.cfg.paths, setup.task))


def _sim_config(settings: LiveBenchSettings, inputs: SimPhaseInputs, setup: FamilySetup,
                cal: Calibration, c: ClassifierConfig) -> SchedulerSimConfig:
    return SchedulerSimConfig(
        replicas=inputs.k, slo_ms=inputs.slo_ms, routing="pow2", service=settings.sim_service,
        max_batch_size=c.max_batch_size, overhead_ms=cal.hops_ms,
        load_window_s=setup.cfg.controller.window_s,
        max_ongoing=max(2 * c.max_queued_items, 64), max_queued_items=c.max_queued_items,
        task=setup.task, job_size=settings.job_size, latency_feedback=c.latency_feedback,
        response_margin_ms=setup.cfg.http.response_margin_ms, seed=settings.seed)


@dataclass(frozen=True)
class KindResult:
    summary: LoadSummary  # over every seed's records
    series: dict[str, Any]  # the first seed's time series


def _simulate_kind(kind: str, run: Predicted, policy: RunPolicy, sim_cfg: SchedulerSimConfig,
                   settings: LiveBenchSettings, setup: FamilySetup,
                   cal: Calibration) -> KindResult:
    arrivals = arrival_times(run.spec, trace_data_dir(run.spec, settings.data_dir))
    duration_s, slo_ms = run.spec.duration_s, sim_cfg.slo_ms
    calibrated = kind == "simcal"
    seeds = range(settings.seed, settings.seed + (settings.sim_seeds if calibrated else 1))
    records: list[RequestRecord] = []
    series: dict[str, Any] = {}
    for seed in seeds:
        # the policy decides from the profile it knows; the service times are the sim's
        served = ServedTimes(cal.served_records, setup.profile, seed=seed) if calibrated else None
        stack = StackDelays(cal.timings, seed=seed) if calibrated else None
        sim = simulate(setup.profile, lambda _k: policy.scheduler(setup.profile), arrivals,
                       duration_s, replace(sim_cfg, seed=seed), service_times=served,
                       stack=stack)
        if not records:
            series = timeseries(sim.records, duration_s, slo_ms)
        records += sim.records
    return KindResult(summarize(records, len(seeds) * duration_s, slo_ms), series)


def simulate_runs(settings: LiveBenchSettings, inputs: SimPhaseInputs) -> SimPhaseResult:
    """Phase 4 from the live runs' records (see module doc)."""
    setup = family_setup(inputs.configs.args, settings.family)
    cal = calibration(settings, inputs)
    result = SimPhaseResult(_sim_inputs(settings, cal, setup), {}, {})
    for run in _predicted(settings, inputs):
        policy = _run_policy(run, setup, settings.family)
        sim_cfg = _sim_config(settings, inputs, setup, cal, policy.classifier)
        for kind in SIM_KINDS:
            k = _simulate_kind(kind, run, policy, sim_cfg, settings, setup, cal)
            result.summaries[f"{kind}_{run.name}"] = k.summary
            result.series[f"{kind} {run.name}"] = k.series
    return result
