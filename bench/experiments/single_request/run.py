"""The single-request figures in one run (python -m bench single-request parses the options):

1. the app on a private local Ray Serve (its own HTTP port; `serve_config.yaml` with overrides),
   single `/v1/classify` requests to one family at one SLO: a geometric capacity ramp
   (bench/experiments/single_request/metrics.py says when it stops and what the capacity is), then Poisson runs
   at 1x, 2x, 3x that capacity;
2. with `serve_floor`, a fresh Ray serving Serve's own floor (bench/experiments/single_request/serve_floor.py:
   ingress, one handle hop, a constant answer), ramped the same way and run at the app's 1x
   rate: the app's path CPU per request beside Serve's (bench/experiments/single_request/path_cpu.py);
3. Ray stopped, a one-process FastAPI + torch server of the family's most accurate variant
   (bench/experiments/single_request/fastapi_floor.py), ramped the same way: the floor a user could write by hand.

Every run goes through bench/core/client.py via the live benchmark's session (records per run,
CPU time per call of every Serve process, load average); the report is bench/experiments/single_request/report.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from app.sim.traces.spec import TraceSpec
from bench.core import serve as lb
from bench.experiments.adaptive_vs_static.family import FamilySetup, family_setup
from bench.experiments.adaptive_vs_static.session import LiveSession, LoadRun
from bench.experiments.adaptive_vs_static.settings import LiveBenchSettings, LocalServe
from bench.experiments.coload.measure import busy_neighbours
from bench.experiments.single_request.fastapi_floor import TorchServerSettings, torch_server
from bench.experiments.single_request.metrics import (
    Capacity,
    FrontRun,
    RampRule,
    front_run,
    pick_capacity,
    ramp_done,
)
from bench.experiments.single_request.path_cpu import PathCpu, path_cpu, path_figures
from bench.experiments.single_request.report import checks
from deployments.ingress.proxy.front_door import settings_from_env


@dataclass(frozen=True)
class FrontSettings(LocalServe):
    config: Path = Path("serve_config.yaml")
    port: int = 8100  # the private Serve's HTTP port
    torch_port: int = 8200  # the FastAPI + torch server's
    family: str = "family"
    policy: str | None = None  # the family's policy; None: as configured
    slo_ms: float = 200.0
    seed: int = 0
    warmup_s: float = 5.0  # before each ramp, not counted
    ramp_start_qps: float = 20.0
    ramp_factor: float = 1.4
    ramp_steps: int = 10
    ramp_s: float = 10.0  # each ramp step
    duration_s: float = 30.0  # each run at a multiple of the capacity
    multiples: tuple[float, ...] = (1.0, 2.0, 3.0)
    # the FastAPI + torch floor and then the app, each at these multiples of the floor's own
    # capacity (what a user who wrote that server instead would see at the same load)
    floor_multiples: tuple[float, ...] = ()
    settle_s: float = 5.0  # after the deployment, before the first request
    num_cpus: int = 8  # Ray logical CPUs
    torch_floor: bool = True  # also measure the FastAPI + torch server
    serve_floor: bool = False  # also measure Serve's no-model floor (a fresh Ray)
    busy_neighbours: int = 0  # busy-loop processes beside the whole run (a second machine state)
    rule: RampRule = field(default_factory=RampRule)
    baseline: Path | None = None  # an earlier run's JSON (today's code): capacity ratio
    records: Path = Path("results/front/records")
    command: str = ""


def code_version() -> dict[str, Any]:
    """The commit the run measured and the tracked files that differ from it (a baseline run
    from an export of an older commit names that commit with GIT_DIR and GIT_WORK_TREE)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "--no-optional-locks", *args], capture_output=True,
                              text=True, check=False).stdout

    modified = git("status", "--porcelain", "--untracked-files=no").splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD").strip() or "unknown",
            "modified": sorted(line[3:] for line in modified)}


def _run(session: LiveSession, name: str, url: str, spec: TraceSpec) -> FrontRun:
    summary = session.load(LoadRun(name, url, spec))
    return front_run(name, summary, session.runs[name].records)


def ramp(session: LiveSession, s: FrontSettings, url: str, prefix: str) -> list[FrontRun]:
    """A warm-up, then Poisson steps from the start rate, times the factor each step, until
    the rule says the system has stopped delivering more within the SLO."""
    session.load(LoadRun(f"{prefix}_warmup", url,
                         TraceSpec("poisson", s.ramp_start_qps, s.warmup_s, seed=s.seed + 1)))
    steps: list[FrontRun] = []
    rate = s.ramp_start_qps
    for i in range(s.ramp_steps):
        steps.append(_run(session, f"{prefix}_ramp_{i}", url,
                          TraceSpec("poisson", rate, s.ramp_s, seed=s.seed)))
        if ramp_done(steps, s.rule):
            break
        rate *= s.ramp_factor
    return steps


def _app_args(s: FrontSettings) -> dict[str, Any]:
    args = lb.serve_args(s.config)
    return args if s.policy is None else lb.with_classifier(args, s.family, policy=s.policy)


def _app_phase(s: FrontSettings, session: LiveSession) -> dict[str, Any]:
    """1. ramp the deployed app; then the multiples of its capacity, same seed."""
    out: dict[str, Any] = {}
    steps = ramp(session, s, s.base_url, "app")
    cap = pick_capacity(steps, s.rule)
    runs = [] if cap is None else [
        _run(session, f"app_{m:g}x", s.base_url,
             TraceSpec("poisson", m * cap.qps, s.duration_s, seed=s.seed))
        for m in s.multiples]
    out.update(ramp=steps, capacity=cap, runs=runs)
    return out


def _torch_phase(s: FrontSettings, session: LiveSession, setup: FamilySetup) -> dict[str, Any]:
    """2. the FastAPI + torch floor, alone on the machine (Ray is stopped by now)."""
    best = setup.most_accurate()
    settings = TorchServerSettings(s.torch_port, s.family, best.variant.name,
                                   str(setup.cfg.paths.models_dir), setup.task, best.accuracy)
    with torch_server(settings) as url:
        steps = ramp(session, s, url, "torch")
        cap = pick_capacity(steps, s.rule)
        runs = [] if cap is None else [
            _run(session, f"torch_{m:g}x", url,
                 TraceSpec("poisson", m * cap.qps, s.duration_s, seed=s.seed))
            for m in s.floor_multiples]
    return {"variant": best.variant.name, "ramp": steps, "capacity": cap, "runs": runs}


def _cpu(session: LiveSession, run: str, offered_qps: float) -> PathCpu:
    return path_cpu(run, offered_qps, session.cpu_ms[run], session.runs[run].records)


def _serve_floor_phase(s: FrontSettings, session: LiveSession,
                       app_cap: Capacity | None) -> dict[str, Any]:
    """2. Serve's own floor on a fresh Ray without the front door: a ramp, then the app's 1x rate."""
    from bench.experiments.single_request.serve_floor import FLOOR_NAME, deploy_floor

    lb.start_ray(s.port, s.num_cpus, front_door=False)
    try:
        deploy_s = deploy_floor(s.base_url)
        time.sleep(s.settle_s)
        url = f"{s.base_url}/{FLOOR_NAME}"
        steps = ramp(session, s, url, "serve_floor")
        runs = [] if app_cap is None else [_run(session, "serve_floor_at_app_1x", url, TraceSpec(
            "poisson", app_cap.qps, s.duration_s, seed=s.seed))]
    finally:
        lb.stop_ray()
    return {"deploy_s": deploy_s, "ramp": steps, "capacity": pick_capacity(steps, s.rule),
            "runs": runs}


def _path_cpu(out: dict[str, Any], session: LiveSession) -> dict[str, Any]:
    """The app's path CPU per call at 1x beside Serve's floor at the same rate and the FastAPI
    + torch server at its capacity."""
    cpus: dict[str, PathCpu] = {}
    for run in [*out["app"]["runs"], *out.get("serve_floor", {}).get("runs", [])]:
        if run.name in ("app_1x", "serve_floor_at_app_1x"):
            cpus[run.name] = _cpu(session, run.name, run.offered_qps)
    torch_cap = out.get("torch", {}).get("capacity")
    if torch_cap is not None:
        cpus["torch_capacity"] = _cpu(session, torch_cap.step, torch_cap.offered_qps)
    return path_figures(cpus)


def _app_at_floor_multiples(s: FrontSettings, session: LiveSession, args: dict[str, Any],
                            floor_qps: float) -> list[FrontRun]:
    """3. the app again (a fresh Ray), at the floor's multiples, same seed as the floor's."""
    lb.start_ray(s.port, s.num_cpus)
    try:
        lb.deploy_app(args, s.base_url)
        time.sleep(s.settle_s)
        session.load(LoadRun("app_vs_torch_warmup", s.base_url,
                             TraceSpec("poisson", s.ramp_start_qps, s.warmup_s, seed=s.seed + 1)))
        return [_run(session, f"app_at_torch_{m:g}x", s.base_url,
                     TraceSpec("poisson", m * floor_qps, s.duration_s, seed=s.seed))
                for m in s.floor_multiples]
    finally:
        lb.stop_ray()


def run_front(s: FrontSettings) -> dict[str, Any]:
    """The whole benchmark; the JSON of docs/data_front.json (figures in `checks`)."""
    with busy_neighbours(s.busy_neighbours):
        return _run_front(s)


def _run_front(s: FrontSettings) -> dict[str, Any]:
    args = _app_args(s)
    version = code_version()
    out: dict[str, Any] = {"command": s.command, "commit": version["commit"],
                           "modified": version["modified"], "settings": s.to_dict()}
    live = LiveBenchSettings(port=s.port, family=s.family, records=s.records, seed=s.seed)
    lb.start_ray(s.port, s.num_cpus)
    try:
        deploy_s = lb.deploy_app(args, s.base_url)  # makes the artifacts family_setup reads
        setup = family_setup(args, s.family)
        session = LiveSession(live, s.slo_ms, str(setup.cfg.paths.models_dir))
        time.sleep(s.settle_s)
        out["app"] = {"deploy_s": deploy_s, **_app_phase(s, session)}
    finally:
        lb.stop_ray()
    if s.serve_floor:
        out["serve_floor"] = _serve_floor_phase(s, session, out["app"]["capacity"])
    if s.torch_floor:
        out["torch"] = _torch_phase(s, session, setup)
        floor = out["torch"]["capacity"]
        if s.floor_multiples and floor is not None:
            out["app_at_torch"] = _app_at_floor_multiples(s, session, args, floor.qps)
    out["cpu_ms_per_call"] = session.cpu_ms
    out["path_cpu"] = _path_cpu(out, session)
    out["loadavg_1min_after_run"] = session.loadavg
    out["machine_cores"] = os.cpu_count()  # the simulator's front stage shares these
    # what the proxies ran (the resim runs it too): the defaults or ADAPTSERVE_FRONT_DOOR
    out["front_door"] = asdict(settings_from_env(os.environ))
    if s.baseline is not None:
        from bench.core.result import read_result

        out["baseline"] = read_result(s.baseline)["data"]["app"]["capacity"]
    out["checks"] = checks(out)
    return out
