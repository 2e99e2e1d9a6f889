"""Phase 4 of the live benchmark: the scheduler simulator on the same profile, plan files,
traces and seeds as the live runs, three ways:

- "sim": batch times from the profile (the model alone on an idle core) and a constant stack
  time per call (p50 at light load);
- "simcal": batch and stack times as the live server measured them in calibration runs, never
  in the runs it predicts (app/sim/replica/served.py): the ramp steps at and past the static
  configuration's capacity (the best-goodput step and the ones after it), the machine's state
  nearest the predicted load (stack times grow with load; the light steps understate them).
  Its figures pool `sim_seeds` runs (service and stack samples);
- "simfront": simcal's batch times behind the front door and the stack's CPU as a front stage
  (bench/experiments/fidelity/classify/front_door.py), seeds pooled as simcal's; the front door's limiter carried from
  run to run as the live proxy's is (the adaptive warm-up simulated before the adaptive runs).
Accuracy: besides the profile's expected accuracy, each source's accuracy on the items its run
sent (bench/experiments/adaptive_vs_static/item_accuracy.py), the quantity the live run measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from app.sim.replica.request_metrics import LoadSummary, RequestRecord, summarize, timeseries
from app.sim.replica.served import CallTiming, ServedTimes, StackDelays, call_timings
from app.sim.replica.sim import SchedulerSimConfig, simulate
from app.sim.traces.spec import TraceSpec, arrival_times
from bench.core import serve as lb
from bench.core.client import trace_data_dir
from bench.experiments.adaptive_vs_static.family import FamilySetup, family_setup
from bench.experiments.adaptive_vs_static.item_accuracy import ItemTable, measure_items
from bench.experiments.adaptive_vs_static.knob_metrics import KnobMetrics, knob_metrics, pool
from bench.experiments.adaptive_vs_static.report import SIM_KINDS, hops_p50_ms
from bench.experiments.adaptive_vs_static.settings import (
    BenchConfigs,
    LiveBenchSettings,
    bench_configs,
    spec_2x,
    static_args,
)
from bench.experiments.adaptive_vs_static.statics import StaticConfig
from bench.experiments.fidelity.classify.front_door import (
    FRONT_KIND,
    FrontModel,
    FrontRuns,
    FrontSim,
    ModelCpu,
    RunCpu,
    simulate_front,
    try_front_model,
)
from bench.experiments.fidelity.classify.run_policy import Predicted, RunPolicy, run_policy
from policies.admission import ConcurrencyLimiter
from policies.profile import Profile

if TYPE_CHECKING:
    from deployments.classifier.config import ClassifierConfig


@dataclass(frozen=True)
class RecordedRun:
    """What a live run left: one record per item, and its time series."""

    records: list[RequestRecord]
    series: dict[str, Any]
    wall_s: float = 0.0  # the load generator's, tail included (0: not recorded)


@dataclass(frozen=True)
class SimPhaseInputs:
    runs: Mapping[str, RecordedRun]  # by run name
    ramp: list[dict[str, Any]]  # the (best) static configuration's capacity ramp steps
    spec_2x: TraceSpec
    spec_1x: TraceSpec | None  # None: a run from before the 1x run existed
    configs: BenchConfigs
    k: int
    slo_ms: float
    # the other static configurations' 2x runs: run name -> their app args
    others: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    # runs whose records give batch times of the variants the calibration runs never ran
    served_runs: tuple[str, ...] = ("warmup_adaptive",)
    # what simfront reads of the run's JSON (FRONT_KEYS; bench/experiments/fidelity/classify/front_door.py)
    front_json: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SimPhaseResult:
    inputs: dict[str, Any]  # what the simulator was fed (docs/data_live.json "sim_inputs")
    summaries: dict[str, LoadSummary]  # "<kind>_<run>"
    series: dict[str, Any]  # "<kind> <run>": the first seed's time series
    knobs: dict[str, KnobMetrics] = field(default_factory=dict)  # "<kind>_<run>", seeds pooled
    # "<kind>_<run>": accuracy on the items it sent, seeds pooled (bench/experiments/adaptive_vs_static/item_accuracy.py)
    item_accuracy: dict[str, float | None] = field(default_factory=dict)
    items: ItemTable | None = None  # every variant's correctness on the items the runs sent


@dataclass(frozen=True)
class Calibration:
    hops_ms: float  # time outside the replica per call at light load
    runs: list[str]  # the calibration runs
    records: list[RequestRecord]  # their records
    served_records: list[RequestRecord]  # + the adaptive warm-up's, for the other variants
    timings: list[CallTiming]


FRONT_KEYS = ("cpu_ms_per_call", "front_door", "machine_cores", "cpu_count", "statics",
              "capacity")


def loaded_steps(steps: list[dict[str, Any]]) -> list[str]:
    """The ramp's runs at and past its best goodput (older JSON names them ramp_<i>)."""
    best = max(range(len(steps)), key=lambda i: steps[i]["goodput_qps"])
    return [st.get("run", f"ramp_{i}") for i, st in enumerate(steps)][best:]


def phase_inputs(settings: LiveBenchSettings, out: Mapping[str, Any],
                 runs: Mapping[str, RecordedRun]) -> SimPhaseInputs:
    """The simulator phase's inputs from a run's JSON (`out`: capacity, statics, k, SLO, the
    1x trace) and its records: the best static configuration, the others' 2x runs (and their
    loaded ramp steps for the batch times of their variants)."""
    args, k, slo_ms = lb.serve_args(settings.config), out["k"], out["slo_ms"]
    st = out.get("statics") or {}
    configs = [StaticConfig.from_dict(c) for c in st.get("configs", [])]
    best = next((c for c in configs if c.label == st.get("best")), None)
    others = [c for c in configs if c is not best and f"static_{c.label}_2x" in runs]
    loaded = [n for c in others for n in loaded_steps(st["capacity"][c.label]["ramp"])]
    return SimPhaseInputs(
        runs, out["capacity"]["ramp"], spec_2x(settings, out["capacity"]["live_qps"]),
        TraceSpec(**out["spec_1x"]) if "spec_1x" in out else None,
        bench_configs(settings, args, k, slo_ms, best), k, slo_ms,
        {f"static_{c.label}_2x": static_args(settings, args, k, slo_ms, c) for c in others},
        ("warmup_adaptive", *loaded), {key: out[key] for key in FRONT_KEYS if key in out})


def predicted_runs(settings: LiveBenchSettings, inputs: SimPhaseInputs) -> list[Predicted]:
    """The runs the simulator predicts: the static ones at 2x, the adaptive ones at 1x, 2x."""
    adaptive = settings.policy
    out = [Predicted("static_2x", inputs.configs.static_args, inputs.spec_2x),
           *(Predicted(name, args, inputs.spec_2x) for name, args in inputs.others.items()),
           Predicted(f"{adaptive}_2x", inputs.configs.adapt_args, inputs.spec_2x)]
    if inputs.spec_1x is not None and f"{adaptive}_1x" in inputs.runs:
        out.insert(-1, Predicted(f"{adaptive}_1x", inputs.configs.adapt_args, inputs.spec_1x))
    return out


WARMUP = "warmup_adaptive"


def in_live_order(settings: LiveBenchSettings, inputs: SimPhaseInputs,
                  predicted: list[Predicted]) -> list[Predicted]:
    """The predicted runs with the adaptive warm-up before the first adaptive run, as live
    (bench/experiments/adaptive_vs_static/phases.py `_at_2x`: at the capacity, poisson, seed + 1)."""
    if WARMUP not in inputs.runs:
        return predicted
    warm = Predicted(WARMUP, inputs.configs.adapt_args,
                     TraceSpec("poisson", inputs.spec_2x.qps / 2, settings.warmup_s,
                               seed=settings.seed + 1))
    first = next((i for i, p in enumerate(predicted) if p.name.startswith(f"{settings.policy}_")),
                 len(predicted))
    return [*predicted[:first], warm, *predicted[first:]]


def calibration(settings: LiveBenchSettings, inputs: SimPhaseInputs) -> Calibration:
    runs, steps = inputs.runs, inputs.ramp
    # time outside the replica, per call, at light load with the runs' job size (the first
    # ramp step); single-item light runs understate it for jobs (decode, transfer, response)
    first = steps[0].get("run", "ramp_0")
    hops_ms = hops_p50_ms(runs[first if settings.job_size > 1 else "light_app"].records)
    names = loaded_steps(steps)
    records = [r for n in names for r in runs[n].records]
    # batch times of the variants the static ramp never runs: from the adaptive warm-up (and
    # the other static configurations' runs)
    seen = {r.variant for r in records}
    served = records + [r for n in inputs.served_runs if n in runs for r in runs[n].records
                        if r.variant not in seen]
    return Calibration(hops_ms, names, records, served, call_timings(records))


def _sim_inputs(settings: LiveBenchSettings, inputs: SimPhaseInputs, cal: Calibration,
                setup: FamilySetup) -> dict[str, Any]:
    served = ServedTimes(cal.served_records, setup.profile, seed=settings.seed)
    return {"hops_p50_ms": cal.hops_ms, "service": settings.sim_service,
            "calibration_runs": cal.runs + [f"{', '.join(inputs.served_runs)} (other variants)"],
            "calibration_calls": len(cal.timings),
            "sim_seeds": settings.sim_seeds, "served_factor": served.factor,
            "served_pairs": sorted(f"{v}@{n}" for v, n in served.samples),
            "stack_p50_ms": StackDelays(cal.timings).p50_total_ms()}


def _sim_config(settings: LiveBenchSettings, inputs: SimPhaseInputs, setup: FamilySetup,
                cal: Calibration, c: ClassifierConfig) -> SchedulerSimConfig:
    return SchedulerSimConfig(
        replicas=inputs.k, slo_ms=inputs.slo_ms, routing="pow2", service=settings.sim_service,
        max_batch_size=c.max_batch_size, overhead_ms=cal.hops_ms,
        load_window_s=setup.cfg.controller.window_s,
        max_ongoing=max(2 * c.max_queued_items, 64), max_queued_items=c.max_queued_items,
        task=setup.task, job_size=settings.job_size, latency_feedback=c.latency_feedback,
        min_accuracy=settings.min_accuracy, utilities=settings.utilities,
        response_margin_ms=setup.cfg.http.response_margin_ms, seed=settings.seed)


@dataclass(frozen=True)
class KindResult:
    summary: LoadSummary  # over every seed's records
    series: dict[str, Any]  # the first seed's time series
    knobs: KnobMetrics  # over every seed's records
    model_cores: float | None = None  # simfront: the model's cores its last pass assumed
    item_accuracy: float | None = None  # on the run's items (ItemTable), seeds pooled


@dataclass(frozen=True)
class FrontSetup:
    """simfront's model and the model-CPU measure it shares the cores with."""

    model: FrontModel
    cpu: ModelCpu
    # per seed, the limiter its chain of runs left: live, the proxy's limiter lives across
    # runs and redeploys, so each run starts from the one before it (app/sim/replica/sim.py)
    doors: dict[int, ConcurrencyLimiter] = field(default_factory=dict)


def _simulate_kind(kind: str, run: Predicted, policy: RunPolicy, sim_cfg: SchedulerSimConfig,
                   settings: LiveBenchSettings, setup: FamilySetup, cal: Calibration,
                   front: FrontSetup | None = None,
                   items: ItemTable | None = None) -> KindResult:
    arrivals = arrival_times(run.spec, trace_data_dir(run.spec, settings.data_dir))
    duration_s, slo_ms = run.spec.duration_s, sim_cfg.slo_ms
    calibrated = kind != "sim"  # simcal, simfront: the live batch times
    seeds = range(settings.seed, settings.seed + (settings.sim_seeds if calibrated else 1))
    records: list[RequestRecord] = []
    series: dict[str, Any] = {}
    knobs, model_cores = list[KnobMetrics](), list[float]()
    for seed in seeds:
        # the policy decides from the profile it knows; the service times are the sim's
        def served(seed: int = seed) -> ServedTimes:
            return ServedTimes(cal.served_records, setup.profile, seed=seed)

        def scheduler(_k: int) -> Any:
            return policy.scheduler(setup.profile)
        cfg = replace(sim_cfg, seed=seed)
        if kind == FRONT_KIND:
            if front is None:
                raise ValueError(f"{FRONT_KIND} needs the front model (bench/experiments/fidelity/classify/front_door.py)")
            sim, cores = simulate_front(front.model, front.cpu, FrontSim(
                run.name, setup.profile, scheduler, arrivals, duration_s, cfg, served),
                front.doors.get(seed))
            if sim.door is not None:
                front.doors[seed] = sim.door
            model_cores.append(cores)
        else:
            stack = StackDelays(cal.timings, seed=seed) if kind == "simcal" else None
            sim = simulate(setup.profile, scheduler, arrivals, duration_s, cfg,
                           service_times=served() if calibrated else None, stack=stack)
        if not records:
            series = timeseries(sim.records, duration_s, slo_ms)
        records += sim.records
        knobs.append(knob_metrics(sim.records, duration_s, slo_ms, settings.job_size,
                                  settings.min_accuracy, settings.utilities))
    return KindResult(summarize(records, len(seeds) * duration_s, slo_ms), series, pool(knobs),
                      float(np.mean(model_cores)) if model_cores else None,
                      None if items is None else items.accuracy(records, slo_ms))


def front_of(settings: LiveBenchSettings, inputs: SimPhaseInputs, cal: Calibration,
             predicted: list[Predicted], profile: Profile) -> FrontSetup | None:
    """simfront's model from the run's CPU figures (None: the run has none; module doc)."""
    model = ModelCpu(profile)
    cpu_ms = inputs.front_json.get("cpu_ms_per_call") or {}
    cpu = {n: RunCpu.of(r.records, settings.job_size, r.wall_s, cpu_ms[n], model)
           for n, r in inputs.runs.items() if n in cpu_ms}
    runs = FrontRuns(cpu, {n: r.records for n, r in inputs.runs.items()},
                     inputs.ramp[0].get("run", "ramp_0"), cal.runs,
                     [p.name for p in predicted] + [WARMUP])
    front = try_front_model(inputs.front_json, runs, settings.job_size, cal.served_records)
    return None if front is None else FrontSetup(front, model)


def simulate_runs(settings: LiveBenchSettings, inputs: SimPhaseInputs) -> SimPhaseResult:
    """Phase 4 from the live runs' records (see module doc)."""
    setup = family_setup(inputs.configs.args, settings.family)
    cal = calibration(settings, inputs)
    items = measure_items(settings.family, setup.cfg.paths.models_dir)
    result = SimPhaseResult(_sim_inputs(settings, inputs, cal, setup), {}, {}, items=items)
    predicted = predicted_runs(settings, inputs)
    front = front_of(settings, inputs, cal, predicted, setup.profile)
    result.inputs[FRONT_KIND] = None if front is None else {**front.model.to_dict(),
                                                            "model_cores": {}}
    kinds = [k for k in SIM_KINDS if k != FRONT_KIND or front is not None]
    result.inputs["item_accuracy"] = items.by_variant()  # the variants on the items sent
    for run in in_live_order(settings, inputs, predicted):
        policy = run_policy(run.args, setup, settings.family)
        sim_cfg = _sim_config(settings, inputs, setup, cal, policy.classifier)
        # the warm-up: simulated only to hand its limiter on, as live, to the adaptive runs
        for kind in (kinds if run.name != WARMUP else [k for k in kinds if k == FRONT_KIND]):
            k = _simulate_kind(kind, run, policy, sim_cfg, settings, setup, cal, front, items)
            result.item_accuracy[f"{kind}_{run.name}"] = k.item_accuracy
            result.summaries[f"{kind}_{run.name}"] = k.summary
            result.series[f"{kind} {run.name}"] = k.series
            result.knobs[f"{kind}_{run.name}"] = k.knobs
            if k.model_cores is not None:
                result.inputs[FRONT_KIND]["model_cores"][run.name] = k.model_cores
    return result
