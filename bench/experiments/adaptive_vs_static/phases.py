"""The live benchmark's phases on a private local Ray/Serve (python -m bench adaptive-vs-static says what
each measures); phase 4, the simulator, is bench/experiments/fidelity/classify/live_runs.py."""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.sim.traces.spec import TraceSpec
from bench.core import serve as lb
from bench.core.probe import app_replicas, serve_memory
from bench.core.run_report import plot_runs
from bench.experiments.adaptive_vs_static.family import FamilySetup, family_setup
from bench.experiments.adaptive_vs_static.item_accuracy import ItemTable, same_items_1x
from bench.experiments.adaptive_vs_static.knobs import (
    knobs_of,
    plot_knobs,
    static_labels,
    utility_checks,
)
from bench.experiments.adaptive_vs_static.report import checks
from bench.experiments.adaptive_vs_static.session import LiveSession, LoadRun
from bench.experiments.adaptive_vs_static.settings import (
    BenchConfigs,
    LiveBenchSettings,
    bench_configs,
    spec_2x,
    static_args,
)
from bench.experiments.adaptive_vs_static.statics import (
    StaticConfig,
    best_static,
    resolve_statics,
    run_names,
)
from bench.experiments.coload.measure import busy_neighbours
from bench.experiments.fidelity.classify.live_runs import RecordedRun, phase_inputs, simulate_runs
from deployments.ingress.proxy.front_door import settings_from_env


@dataclass(frozen=True)
class Bench:
    settings: LiveBenchSettings
    k: int  # replicas of the family
    slo_ms: float
    configs: BenchConfigs


def bench_of(settings: LiveBenchSettings) -> Bench:
    args = lb.serve_args(settings.config)
    fam = lb.classifier_args(args, settings.family)
    k = int(settings.replicas or fam.get("num_replicas", 1))
    slo_ms = float(settings.slo_ms or fam.get("default_slo_ms", 200.0))
    return Bench(settings, k, slo_ms, bench_configs(settings, args, k, slo_ms))


def _overhead_and_memory(b: Bench, session: LiveSession, setup: FamilySetup) -> dict[str, Any]:
    """1. the default app and the bare graph at light load at the same time: overhead p50
    (latency - compute), app vs bare; RSS of every replica process of the default app."""
    from bench.experiments.single_request import bare_graph
    from bench.experiments.single_request.bare_graph import BareSettings

    a, best, ccfg = b.settings, setup.most_accurate(), setup.classifier
    out: dict[str, Any] = {"deploy_bare_s": bare_graph.deploy_bare(a.base_url, BareSettings(
        a.family, str(setup.cfg.paths.models_dir), best.variant.name, setup.task,
        ccfg.max_batch_size, 1, ccfg.ray_actor_options, best.accuracy))}
    session.log(f"deployed default app + bare ({best.variant.name}); task {setup.task}, "
                f"K={b.k}, SLO {b.slo_ms:g} ms")
    app_light, bare_light = session.load_together([
        LoadRun("light_app", a.base_url, TraceSpec("poisson", a.light_qps, a.light_s,
                                                   seed=a.seed)),
        LoadRun("light_bare", f"{a.base_url}/{bare_graph.BARE_NAME}",
                TraceSpec("poisson", a.light_qps, a.light_s, seed=a.seed + 1))])
    mem = serve_memory()
    replicas = app_replicas(mem, lb.APP_NAME)
    out["memory"] = {"replicas": [m.__dict__ for m in replicas],
                     "others": [m.__dict__ for m in mem if m not in replicas],
                     "total_mib": sum(m.rss_mib for m in replicas)}
    out["overhead"] = {"app_p50_ms": app_light.overhead_p50_ms,
                       "bare_p50_ms": bare_light.overhead_p50_ms,
                       "ratio": app_light.overhead_p50_ms / bare_light.overhead_p50_ms,
                       "app_compute_p50_ms": app_light.compute_p50_ms,
                       "bare_compute_p50_ms": bare_light.compute_p50_ms}
    bare_graph.delete_bare()
    return out


def _deploy_static(b: Bench, static: StaticConfig) -> float:
    a = b.settings
    took = lb.deploy_app(static_args(a, b.configs.args, b.k, b.slo_ms, static), a.base_url)
    time.sleep(a.settle_s)  # the replaced replicas shut down before anything is measured
    return took


def _capacity(b: Bench, session: LiveSession, setup: FamilySetup,
              statics: list[StaticConfig]) -> dict[str, Any]:
    """2. each static configuration with K replicas: capacity from the profile and live (the
    ramp's best goodput; the serving stack may saturate before the model); the best static
    configuration is the one of highest live capacity."""
    ccfg, caps, deploy_s = setup.classifier, {}, {}
    for st in statics:
        deploy_s[st.label] = _deploy_static(b, st)
        est = lb.profile_capacity(setup.profile, st.variant, b.slo_ms, ccfg.percentile,
                                  ccfg.max_batch_size, b.k)
        steps = session.ramp(est.qps, run_names(st, "", len(statics) > 1)[0])
        caps[st.label] = {"profile": est.__dict__, "ramp": steps,
                          "live_qps": max(r["goodput_qps"] for r in steps)}
        session.log(f"static {st.label} ({st.policy}): capacity {caps[st.label]['live_qps']:.1f}"
                    f" items/s")
    best = b.settings.load_of or best_static({label: c["live_qps"] for label, c in caps.items()})
    if best not in caps:
        raise ValueError(f"--load-of {best!r} is not a static configuration: {sorted(caps)}")
    if caps[best]["live_qps"] <= 0:
        raise RuntimeError(f"static {best} answered nothing within the SLO in its ramp (records "
                           f"in {b.settings.records}): no capacity to run at 2x of")
    return {"deploy_static_s": deploy_s[best], "capacity": caps[best],
            "statics": {"spec": b.settings.statics, "best": best, "deploy_s": deploy_s,
                        "configs": [st.to_dict() for st in statics], "capacity": caps}}


def _statics_at_2x(b: Bench, session: LiveSession, statics: list[StaticConfig], best: str,
                   live_qps: float) -> None:
    """3a. twice the best one's capacity on every static configuration, same trace and seed
    (the one deployed last first: no redeploy)."""
    a, deployed = b.settings, statics[-1].label
    for st in sorted(statics, key=lambda s: s.label != deployed):
        if st.label != deployed:
            _deploy_static(b, st)
        name = run_names(st, best, len(statics) > 1)[1]
        session.load(LoadRun(name, a.base_url, spec_2x(a, live_qps), a.job_size))


def _at_2x(b: Bench, session: LiveSession, live_qps: float) -> dict[str, Any]:
    """3b. the adaptive policy at twice the capacity, the static runs' trace and seed; also at
    the capacity itself, for the simulator's fidelity at a second load."""
    a = b.settings
    out: dict[str, Any] = {"deploy_adaptive_s": lb.deploy_app(b.configs.adapt_args, a.base_url)}
    time.sleep(a.settle_s)
    # warm-up at the static capacity (the replica's latency feedback fills up here)
    session.load(LoadRun("warmup_adaptive", a.base_url,
                         TraceSpec("poisson", live_qps / a.job_size, a.warmup_s, seed=a.seed + 1),
                         a.job_size))
    spec_1x = TraceSpec(a.trace, live_qps / a.job_size, a.duration_s / 2, seed=a.seed + 2)
    out["spec_1x"] = spec_1x.to_dict()
    session.load(LoadRun(f"{a.policy}_1x", a.base_url, spec_1x, a.job_size))
    session.load(LoadRun(f"{a.policy}_2x", a.base_url, spec_2x(a, live_qps), a.job_size))
    return out


def _live_phases(b: Bench, out: dict[str, Any], t0: float) -> LiveSession:
    """Phases 1-3 on a fresh local Ray, their figures into `out`; the session keeps the runs."""
    a = b.settings
    lb.start_ray(a.port, a.num_cpus)
    try:
        with busy_neighbours(a.busy_neighbours):
            out["busy_neighbours"] = a.busy_neighbours
            out["deploy_default_s"] = lb.deploy_app(b.configs.args, a.base_url)
            setup = family_setup(b.configs.args, a.family)
            statics = resolve_statics(a.statics, setup.profile, a.policy, a.min_accuracy)
            session = LiveSession(a, b.slo_ms, str(setup.cfg.paths.models_dir), t0)
            out.update(_overhead_and_memory(b, session, setup))
            out.update(_capacity(b, session, setup, statics))
            live_qps = out["capacity"]["live_qps"]
            _statics_at_2x(b, session, statics, out["statics"]["best"], live_qps)
            out.update(_at_2x(b, session, live_qps))
    finally:
        lb.stop_ray()
    return session


def run_live(settings: LiveBenchSettings) -> dict[str, Any]:
    """The whole benchmark: the live phases, then the simulator on their records; the JSON
    of docs/data_live.json (and its figure at `settings.png`)."""
    t0 = time.perf_counter()
    a, b = settings, bench_of(settings)
    out: dict[str, Any] = {"command": a.command, "family": a.family, "k": b.k,
                           "slo_ms": b.slo_ms, "trace": a.trace, "seed": a.seed,
                           "job_size": a.job_size, "policy": a.policy,
                           "min_accuracy": a.min_accuracy, "utilities": list(a.utilities)}
    session = _live_phases(b, out, t0)
    runs = {n: RecordedRun(r.records, r.series, r.wall_s) for n, r in session.runs.items()}
    out["cpu_ms_per_call"] = session.cpu_ms
    out["cpu_count"] = out["machine_cores"] = os.cpu_count()  # simfront's front stage shares them
    # what the proxies ran (simfront runs it too): the defaults or ADAPTSERVE_FRONT_DOOR
    out["front_door"] = asdict(settings_from_env(os.environ))
    sim = simulate_runs(a, phase_inputs(a, out, runs))
    out["sim_inputs"] = sim.inputs
    for name in ("static_2x", f"{a.policy}_2x"):
        sim.series[f"live {name}"] = session.runs[name].series
    out["runs"] = {n: r.summary for n, r in session.runs.items()}
    out["loadavg_1min_after_run"] = session.loadavg
    out["sim"] = sim.summaries
    out["sim_item_accuracy"] = sim.item_accuracy
    out["accuracy_1x_same_items"] = _same_items_1x(out, session, sim.items, b.slo_ms, a.policy)
    out["series"] = sim.series
    out["checks"] = checks(out, a.policy)
    out["knobs"] = knobs_of(a, out, {n: r.records for n, r in runs.items()}, sim.knobs)
    if a.utilities:  # OTAS's figure: utility over the best fixed configuration
        utility = utility_checks(out["knobs"])
        out["checks"]["pass"].update(utility.pop("pass", {}))
        out["checks"].update(utility)
    best = out["statics"]["best"]
    shown = {k: v for k, v in sim.series.items() if not k.split(" ", 1)[1].startswith("static_")
             or k.endswith(" static_2x")}  # the other static configurations: in the knobs plot
    plot_runs(shown, b.slo_ms, a.png, title=f"{a.family}: static ({best}) vs {a.policy} at 2x "
                                            f"capacity, live and simulated (K={b.k})")
    plot_knobs(out["knobs"], static_labels(out["statics"]), knobs_png(a.png),
               title=f"{a.family}: {a.policy} vs static configurations at 2x the best one's "
                     f"capacity (K={b.k}, jobs of {a.job_size})")
    return out


def _same_items_1x(out: dict[str, Any], session: LiveSession, items: ItemTable | None,
                   slo_ms: float, policy: str) -> dict[str, Any] | None:
    """The best static's accuracy on the items the adaptive 1x run answered in time, beside
    that run's own (None without a 1x run or an item table)."""
    run = session.runs.get(f"{policy}_1x")
    best = next((c for c in out["statics"]["configs"] if c["label"] == out["statics"]["best"]),
                None)
    if run is None or items is None or best is None:
        return None
    found = same_items_1x(items, run.records, best["variant"], slo_ms)
    return None if found is None else {"static": best["label"], "variant": best["variant"],
                                       **found}


def knobs_png(png: Path) -> Path:
    """The knobs plot beside the time-series one: <stem>_knobs.png."""
    return png.with_name(f"{png.stem}_knobs{png.suffix}")
