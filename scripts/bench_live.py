"""Issue 4's live figures in one run, side by side (table + docs/data_live.json + PNG).

    .venv/bin/python scripts/bench_live.py [--config serve_config.yaml] [--port 8100]

Phases on a private local Ray/Serve (HTTP port --port), all with `app/bench/loadgen.py`:
 1. default app (serve_config.yaml as is) + the bare graph (app/bench/bare.py, same family, its most
    accurate variant), both driven at the same time at light load: overhead p50
    (latency - compute), app vs bare (c); RSS of every replica process of the default app (d);
 2. the family on the most accurate static configuration, K replicas: capacity from the
    profile, and live: a geometric ramp until SLO attainment drops below 90%; capacity = the
    best goodput seen (a);
 3. 2x that capacity, same trace and seed: static, then the adaptive policy (a);
 4. the scheduler simulator on the same profile, plan files, trace and seed (b).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


from app.bench import live as lb  # noqa: E402
from app.bench.live_report import SIM_KINDS, checks, hops_p50_ms, report  # noqa: E402
from app.bench.loadgen import LoadgenConfig, LoadResult, Payload, run_load  # noqa: E402
from app.bench.loadgen_report import plot_runs, write_json  # noqa: E402
from app.sim.replica.request_metrics import LoadSummary, RequestRecord, summarize, timeseries  # noqa: E402
from app.sim.replica.served import ServedTimes, StackDelays, call_timings  # noqa: E402
from app.sim.replica.sim import SchedulerSimConfig, simulate  # noqa: E402
from app.sim.traces.spec import TraceSpec, arrival_times  # noqa: E402


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", type=Path, default=Path("serve_config.yaml"))
    p.add_argument("--port", type=int, default=8100)
    p.add_argument("--family", default="family")
    p.add_argument("--policy", default="ramsis", help="adaptive scheduler of the family")
    p.add_argument("--replicas", type=int, default=None, help="K (default: as configured)")
    p.add_argument("--slo-ms", type=float, default=None, help="default: the family's SLO")
    p.add_argument("--trace", default="poisson", choices=["poisson", "twitter", "constant"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--duration-s", type=float, default=60.0, help="each 2x-load run")
    p.add_argument("--ramp-s", type=float, default=15.0, help="each capacity ramp step")
    p.add_argument("--ramp-start", type=float, default=10.0, help="first ramp rate, items/s")
    p.add_argument("--ramp-factor", type=float, default=1.5)
    p.add_argument("--ramp-steps", type=int, default=8)
    p.add_argument("--job-size", type=int, default=1,
                   help="items per request of the ramp and 2x runs (>1: POST /v1/jobs)")
    p.add_argument("--settle-s", type=float, default=10.0, help="pause after a redeploy")
    p.add_argument("--warmup-s", type=float, default=15.0, help="adaptive warm-up run")
    p.add_argument("--light-qps", type=float, default=4.0)
    p.add_argument("--light-s", type=float, default=30.0)
    p.add_argument("--sim-service", default="sampled", help="p50|p95|mean|sampled")
    p.add_argument("--sim-seeds", type=int, default=3, help="simcal runs pooled")
    p.add_argument("--num-cpus", type=int, default=8, help="Ray logical CPUs")
    p.add_argument("--out", type=Path, default=Path("docs/data_live.json"))
    p.add_argument("--png", type=Path, default=Path("docs/figures/live.png"))
    p.add_argument("--records", type=Path, default=Path("results/bench_live"))
    p.add_argument("--resim", type=Path, default=None,
                   help="no live runs: redo the simulator phase of this finished run's JSON "
                        "from its --records")
    return p.parse_args()


class Bench:
    def __init__(self, a: argparse.Namespace) -> None:
        self.a = a
        self.base = f"http://127.0.0.1:{a.port}"
        self.args = lb.serve_args(a.config)
        fam = lb.classifier_args(self.args, a.family)
        self.k = int(a.replicas or fam.get("num_replicas", 1))
        self.slo_ms = float(a.slo_ms or fam.get("default_slo_ms", 200.0))
        self.runs: dict[str, LoadResult] = {}
        self.payloads: dict[int, list[Payload]] = {}
        self.models_dir: str | None = None
        self.loadavg: dict[str, float] = {}
        self.cpu_ms: dict[str, dict[str, float]] = {}
        self.t0 = time.perf_counter()

    def log(self, msg: str) -> None:
        print(f"[{time.perf_counter() - self.t0:6.0f} s] {msg}", flush=True)

    def load(self, name: str, url: str, spec: TraceSpec, job_size: int = 1) -> LoadSummary:
        return self.load_together([(name, url, spec, job_size)])[0]

    def load_together(self, runs: list[tuple[str, str, TraceSpec, int]]) -> list[LoadSummary]:
        """Run the load generators at the same time (one thread each), so that the runs see
        the same state of the shared machine."""
        from concurrent.futures import ThreadPoolExecutor

        from app.bench.loadgen import payloads_from_model

        cfgs = []
        for _, url, spec, job in runs:
            cfg = LoadgenConfig(url=url, model=self.a.family, trace=spec, slo_ms=self.slo_ms,
                                timeout_s=max(10.0, 0.02 * self.slo_ms), job_size=job)
            if job not in self.payloads:
                self.payloads[job] = payloads_from_model(cfg, models_dir=self.models_dir)
            cfgs.append(cfg)
        cpu0 = lb.serve_cpu_s()
        with ThreadPoolExecutor(len(cfgs)) as pool:
            results = list(pool.map(lambda c: run_load(c, self.payloads[c.job_size]), cfgs))
        cpu1 = lb.serve_cpu_s()
        calls = sum(len(r.records) / c.job_size for r, c in zip(results, cfgs, strict=True))
        out = []
        for (name, _, spec, job), res in zip(runs, results, strict=True):
            self.runs[name] = res
            # CPU ms per call of each process, over all runs of this batch
            self.cpu_ms[name] = {k: 1000 * (cpu1[k] - v) / max(calls, 1)
                                 for k, v in cpu0.items() if k in cpu1}
            self.loadavg[name] = os.getloadavg()[0]  # 1-min load average of the shared machine
            write_json(self.a.records / f"{name}.json", res.to_dict())
            s = res.summary
            self.log(f"{name}: {spec.kind} {spec.qps:.1f} calls/s x {job} -> goodput "
                     f"{s.goodput_qps:.1f}/s, attainment {100 * s.slo_attainment:.1f}% (admitted "
                     f"{100 * s.slo_attainment_admitted:.1f}%), acc {s.accuracy_of_satisfied:.3f}, "
                     f"p50 {s.latency_p50_ms:.0f} ms, errors {s.errors + s.timeouts}, "
                     f"loadavg {self.loadavg[name]:.1f}")
            out.append(s)
        return out

    def ramp(self, limit_qps: float) -> list[dict[str, float]]:
        """Offered item rate from --ramp-start, times --ramp-factor per step, until the goodput
        stops rising (a step adds under 3%), SLO attainment falls below 50%, or the rate passes
        1.3x the profile's capacity. Capacity = the best goodput seen: the most answers within
        the SLO per second the configuration delivers at any load (not the last load it met at
        90%, below which a configuration that sheds gracefully still delivers more)."""
        a, rate, steps, best = self.a, self.a.ramp_start, [], 0.0
        for i in range(a.ramp_steps):
            s = self.load(f"ramp_{i}", self.base,
                          TraceSpec("poisson", rate / a.job_size, a.ramp_s, seed=a.seed),
                          a.job_size)
            steps.append({"offered_qps": s.offered_qps, "goodput_qps": s.goodput_qps,
                          "attainment": s.slo_attainment})
            rate *= a.ramp_factor
            if (s.goodput_qps < 1.03 * best or s.slo_attainment < 0.5
                    or rate > 1.3 * limit_qps):
                break
            best = max(best, s.goodput_qps)
        return steps


def simulate_runs(a: argparse.Namespace, runs: dict[str, Any], steps: list[dict[str, float]],
                  spec: TraceSpec, spec_1x: TraceSpec | None, args: dict[str, Any],
                  static_args: dict[str, Any],
                  adapt_args: dict[str, Any], k: int, slo_ms: float
                  ) -> tuple[dict[str, Any], dict[str, LoadSummary], dict[str, Any]]:
    """Phase 4 from the live runs' records (`runs`: name -> .records, .series)."""
    from app.builder import ensure_artifacts, load_config
    from deployments.classifier.policy_setup import build_task_policy, read_plan
    from deployments.ingress.catalog import profile_file
    from deployments.models.registry import load_model
    from profiling.artifacts import load_profile

    cfg = load_config(args)
    ccfg = cfg.classifier(a.family)
    task = (ccfg.tasks or list(load_model(a.family, cache_dir=cfg.paths.models_dir,
                                          device="cpu").tasks()))[0]
    profile = load_profile(profile_file(cfg.paths.profiles_dir, a.family, task))
    # 4. the simulator on the same profile, plans, trace and seed. "sim": batch times from the
    # profile (the model alone on an idle core) and a constant stack time per call (p50 at light
    # load); "simcal": batch and stack times as the live server measured them in the calibration
    # runs, never in the runs it predicts (app/sim/replica/served.py): the ramp steps at and past the
    # static configuration's capacity (the best-goodput step and the ones after it), the
    # machine's state nearest the predicted load (stack times grow with load; the light steps
    # understate them). Its figures pool --sim-seeds runs (service and stack samples).
    # time outside the replica, per call, at light load with the runs' job size (the first
    # ramp step); single-item light runs understate it for jobs (decode, transfer, response)
    hops_ms = hops_p50_ms(runs["ramp_0" if a.job_size > 1 else "light_app"])
    best_step = max(range(len(steps)), key=lambda i: steps[i]["goodput_qps"])
    calib = [f"ramp_{i}" for i in range(best_step, len(steps))]
    calib_records = [r for n in calib for r in runs[n].records]
    # batch times of the variants the static ramp never runs: from the adaptive warm-up
    seen = {r.variant for r in calib_records}
    served_records = calib_records + [r for r in runs["warmup_adaptive"].records
                                      if r.variant not in seen]
    served = ServedTimes(served_records, profile, seed=a.seed)
    timings = call_timings(calib_records)
    sim_inputs = {"hops_p50_ms": hops_ms, "service": a.sim_service,
                  "calibration_runs": calib + ["warmup_adaptive (other variants)"],
                  "calibration_calls": len(timings),
                  "sim_seeds": a.sim_seeds, "served_factor": served.factor,
                  "served_pairs": sorted(f"{v}@{n}" for v, n in served.samples),
                  "stack_p50_ms": StackDelays(timings).p50_total_ms()}
    sims: dict[str, LoadSummary] = {}
    series: dict[str, Any] = {}
    predicted = [("static_2x", static_args, spec), (f"{a.policy}_2x", adapt_args, spec)]
    if spec_1x is not None and f"{a.policy}_1x" in runs:
        predicted.insert(1, (f"{a.policy}_1x", adapt_args, spec_1x))
    for run_name, run_args, run_spec in predicted:
        arrivals = arrival_times(run_spec)
        run_cfg = load_config(run_args)
        # the plan file must be this config's (a no-op right after the live runs; --resim may
        # follow other deployments that rewrote it)
        ensure_artifacts(run_cfg)
        c = run_cfg.classifier(a.family)
        plan = read_plan(cfg.paths.plans_dir, a.family, task, c.policy)

        def make(_k: int, c: Any = c, plan: Any = plan) -> Any:
            return build_task_policy(c, profile, plan).scheduler

        for kind in SIM_KINDS:
            sim_cfg = SchedulerSimConfig(
                replicas=k, slo_ms=slo_ms, routing="pow2", service=a.sim_service,
                max_batch_size=c.max_batch_size, overhead_ms=hops_ms,
                load_window_s=cfg.controller.window_s,
                max_ongoing=max(2 * c.max_queued_items, 64), max_queued_items=c.max_queued_items,
                task=task, job_size=a.job_size, latency_feedback=c.latency_feedback,
                response_margin_ms=cfg.http.response_margin_ms,
                seed=a.seed)
            cal = kind == "simcal"
            records: list[RequestRecord] = []
            for seed in range(a.seed, a.seed + (a.sim_seeds if cal else 1)):
                # the policy decides from the profile it knows; the service times are the sim's
                served_s = ServedTimes(served_records, profile, seed=seed) if cal else None
                sim = simulate(profile, make, arrivals, run_spec.duration_s,
                               replace(sim_cfg, seed=seed), service_times=served_s,
                               stack=StackDelays(timings, seed=seed) if cal else None)
                if not records:
                    series[f"{kind} {run_name}"] = timeseries(sim.records, run_spec.duration_s,
                                                              slo_ms)
                records += sim.records
            n_runs = len(records) // max(len(sim.records), 1)
            sims[f"{kind}_{run_name}"] = summarize(records, n_runs * run_spec.duration_s, slo_ms)
    return sim_inputs, sims, series


def run(a: argparse.Namespace) -> dict[str, Any]:
    from app.builder import load_config
    from deployments.ingress.catalog import profile_file
    from profiling.artifacts import load_profile

    b = Bench(a)
    out: dict[str, Any] = {"command": " ".join(sys.argv), "family": a.family, "k": b.k,
                           "slo_ms": b.slo_ms, "trace": a.trace, "seed": a.seed,
                           "job_size": a.job_size}
    lb.start_ray(a.port, a.num_cpus)
    try:
        # 1. default app + bare graph: overhead and memory
        out["deploy_default_s"] = lb.deploy_app(b.args, b.base)
        cfg = load_config(b.args)
        ccfg = cfg.classifier(a.family)
        b.models_dir = str(cfg.paths.models_dir)
        from deployments.models.registry import load_model
        task = (ccfg.tasks or list(load_model(a.family, cache_dir=cfg.paths.models_dir,
                                              device="cpu").tasks()))[0]
        profile = load_profile(profile_file(cfg.paths.profiles_dir, a.family, task))
        best = profile.variants[max(range(len(profile.variants)),
                                    key=lambda i: profile.variants[i].accuracy)]
        out["deploy_bare_s"] = lb.deploy_bare(
            b.base, a.family, str(cfg.paths.models_dir), best.variant.name, task,
            ccfg.max_batch_size, ccfg.ray_actor_options, best.accuracy)
        b.log(f"deployed default app + bare ({best.variant.name}); task {task}, K={b.k}, "
              f"SLO {b.slo_ms:g} ms")
        app_light, bare_light = b.load_together([
            ("light_app", b.base, TraceSpec("poisson", a.light_qps, a.light_s, seed=a.seed), 1),
            ("light_bare", f"{b.base}/{lb.BARE_NAME}",
             TraceSpec("poisson", a.light_qps, a.light_s, seed=a.seed + 1), 1)])
        mem = lb.serve_memory()
        replicas = lb.app_replicas(mem)
        out["memory"] = {"replicas": [m.__dict__ for m in replicas],
                         "others": [m.__dict__ for m in mem if m not in replicas],
                         "total_mib": sum(m.rss_mib for m in replicas)}
        out["overhead"] = {"app_p50_ms": app_light.overhead_p50_ms,
                           "bare_p50_ms": bare_light.overhead_p50_ms,
                           "ratio": app_light.overhead_p50_ms / bare_light.overhead_p50_ms,
                           "app_compute_p50_ms": app_light.compute_p50_ms,
                           "bare_compute_p50_ms": bare_light.compute_p50_ms}
        from ray import serve
        serve.delete(lb.BARE_NAME)

        # 2. static most-accurate configuration with K replicas: capacity
        static_args = lb.with_classifier(b.args, a.family, policy="most_accurate",
                                         num_replicas=b.k, default_slo_ms=b.slo_ms)
        out["deploy_static_s"] = lb.deploy_app(static_args, b.base)
        time.sleep(a.settle_s)  # the replaced replicas shut down before anything is measured
        est = lb.profile_capacity(profile, best.variant.name, b.slo_ms, ccfg.percentile,
                                  ccfg.max_batch_size, b.k)
        # The profile only knows the model; the serving stack may saturate first.
        steps = b.ramp(est.qps)
        live_cap = max(r["goodput_qps"] for r in steps)
        out["capacity"] = {"profile": est.__dict__, "ramp": steps, "live_qps": live_cap}

        # 3. 2x capacity: static vs adaptive, same trace and seed
        spec = TraceSpec(a.trace, 2 * live_cap / a.job_size, a.duration_s, seed=a.seed)
        b.load("static_2x", b.base, spec, a.job_size)
        # the adaptive plan expects the runs' calls: jobs of --job-size items sharing a deadline
        adapt_plan = {**(lb.classifier_args(b.args, a.family).get("plan") or {}),
                      "job_size": a.job_size}
        adapt_args = lb.with_classifier(b.args, a.family, policy=a.policy, num_replicas=b.k,
                                        plan=adapt_plan, default_slo_ms=b.slo_ms)
        out["deploy_adaptive_s"] = lb.deploy_app(adapt_args, b.base)
        time.sleep(a.settle_s)
        # warm-up at the static capacity (the replica's latency feedback fills up here)
        b.load("warmup_adaptive", b.base,
               TraceSpec("poisson", live_cap / a.job_size, a.warmup_s, seed=a.seed + 1),
               a.job_size)
        # at the static capacity, for the simulator's fidelity at a second load (4.)
        spec_1x = TraceSpec(a.trace, live_cap / a.job_size, a.duration_s / 2, seed=a.seed + 2)
        out["spec_1x"] = spec_1x.to_dict()
        b.load(f"{a.policy}_1x", b.base, spec_1x, a.job_size)
        b.load(f"{a.policy}_2x", b.base, spec, a.job_size)
    finally:
        lb.stop_ray()

    out["sim_inputs"], sims, series = simulate_runs(a, b.runs, steps, spec, spec_1x, b.args,
                                                   static_args, adapt_args, b.k, b.slo_ms)
    for name in ("static_2x", f"{a.policy}_2x"):
        series[f"live {name}"] = b.runs[name].series
    out["runs"] = {n: r.summary for n, r in b.runs.items()}
    out["loadavg_1min_after_run"] = b.loadavg
    out["cpu_ms_per_call"] = b.cpu_ms
    out["cpu_count"] = os.cpu_count()
    out["sim"] = sims
    out["series"] = series
    out["checks"] = checks(out, a.policy)
    plot_runs(series, b.slo_ms, a.png, title=f"{a.family}: static vs {a.policy} at 2x capacity, "
                                             f"live and simulated (K={b.k})")
    return out


def resim(a: argparse.Namespace) -> dict[str, Any]:
    """Phase 4 again on a finished run: its JSON (`--resim`) and its records (`--records`)."""
    from dataclasses import fields
    from types import SimpleNamespace

    out: dict[str, Any] = json.loads(Path(a.resim).read_text())
    a.job_size, a.seed, a.trace = out["job_size"], out["seed"], out["trace"]
    a.policy = next(n[:-3] for n in out["runs"] if n.endswith("_2x") and n != "static_2x")
    names = {f.name for f in fields(LoadSummary)}
    out["runs"] = {n: LoadSummary(**{k: v for k, v in r.items() if k in names})
                   for n, r in out["runs"].items()}
    runs = {}
    for f in sorted(a.records.glob("*.json")):
        d = json.loads(f.read_text())
        runs[f.stem] = SimpleNamespace(records=[RequestRecord(**r) for r in d["records"]],
                                       series=d["timeseries"])
    args = lb.serve_args(a.config)
    static_args = lb.with_classifier(args, a.family, policy="most_accurate",
                                     num_replicas=out["k"], default_slo_ms=out["slo_ms"])
    plan = {**(lb.classifier_args(args, a.family).get("plan") or {}), "job_size": a.job_size}
    adapt_args = lb.with_classifier(args, a.family, policy=a.policy, num_replicas=out["k"],
                                    plan=plan, default_slo_ms=out["slo_ms"])
    spec = TraceSpec(a.trace, 2 * out["capacity"]["live_qps"] / a.job_size, a.duration_s,
                     seed=a.seed)
    spec_1x = TraceSpec(**out["spec_1x"]) if "spec_1x" in out else None
    out["sim_inputs"], out["sim"], series = simulate_runs(
        a, runs, out["capacity"]["ramp"], spec, spec_1x, args, static_args, adapt_args,
        out["k"], out["slo_ms"])
    out["checks"] = checks(out, a.policy)
    return out


def main() -> int:
    a = parse()
    out = resim(a) if a.resim else run(a)
    print(report(out))
    write_json(a.out, out)
    print(f"wrote {a.out} and {a.png}")
    return 0 if all(out["checks"]["pass"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
