"""Settings of the live benchmark (python -m bench adaptive-vs-static parses them from its command line), and
the serve configurations it derives from them: the app as configured, a static configuration
(bench/experiments/adaptive_vs_static/statics.py; the most accurate variant by default), and the adaptive one."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.sim.traces.spec import TraceSpec
from bench.core import serve as lb
from bench.experiments.adaptive_vs_static.statics import StaticConfig


class LocalServe:
    """What every benchmark's frozen settings share: its private Serve's URL (`port`) and a
    JSON form (paths as strings)."""

    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def to_dict(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, Path) else v
                for k, v in asdict(self).items()}  # type: ignore[call-overload]


@dataclass(frozen=True)
class LiveBenchSettings(LocalServe):
    config: Path = Path("serve_config.yaml")
    port: int = 8100
    family: str = "family"
    policy: str = "ramsis"  # the adaptive scheduler of the family
    replicas: int | None = None  # K; None: as configured
    slo_ms: float | None = None  # None: the family's default SLO
    trace: str = "poisson"
    seed: int = 0
    duration_s: float = 60.0  # each 2x-load run
    ramp_s: float = 15.0  # each capacity ramp step
    ramp_start_qps: float = 10.0  # first ramp rate, items/s
    ramp_factor: float = 1.5
    ramp_steps: int = 8
    job_size: int = 1  # items per request of the ramp and 2x runs (>1: POST /v1/jobs)
    settle_s: float = 10.0  # pause after a redeploy
    warmup_s: float = 15.0  # adaptive warm-up run
    light_qps: float = 4.0
    light_s: float = 30.0
    sim_service: str = "sampled"  # p50|p95|mean|sampled
    sim_seeds: int = 3  # simcal runs pooled
    num_cpus: int = 8  # Ray logical CPUs
    out: Path = Path("docs/data_live.json")
    png: Path = Path("docs/figures/live.png")
    records: Path = Path("results/bench_live")
    resim: Path | None = None  # a finished run's JSON: redo only its simulator phase
    data_dir: Path | None = None  # shared data directory (--trace twitter); None: the default
    statics: str = "most_accurate"  # most_accurate | all | labels (bench/experiments/adaptive_vs_static/statics.py)
    load_of: str | None = None  # the static whose capacity is 1x (None: the best = highest)
    min_accuracy: float | None = None  # the requests' accuracy SLO (MOSEL's), sent and judged
    utilities: tuple[float, ...] = ()  # the requests' utilities per call, cyclic (OTAS's)
    busy_neighbours: int = 0  # busy-loop processes beside the live phases (a machine state)
    command: str = ""  # the command line, recorded in the JSON


@dataclass(frozen=True)
class BenchConfigs:
    """The app args as configured, and the two configurations the 2x runs compare."""

    args: dict[str, Any]
    static_args: dict[str, Any]  # the (best) static configuration, K replicas
    adapt_args: dict[str, Any]  # the adaptive policy, its plan built for the runs' job size


def static_args(settings: LiveBenchSettings, args: dict[str, Any], k: int, slo_ms: float,
                static: StaticConfig | None = None) -> dict[str, Any]:
    """The app args with the family on `static` (default: its most accurate variant), K
    replicas."""
    changes = static.classifier_changes() if static is not None else {
        "policy": "most_accurate", "policy_params": {}}
    return lb.with_classifier(args, settings.family, **changes, num_replicas=k,
                              default_slo_ms=slo_ms)


def bench_configs(settings: LiveBenchSettings, args: dict[str, Any], k: int,
                  slo_ms: float, static: StaticConfig | None = None) -> BenchConfigs:
    family = settings.family
    static_cfg = static_args(settings, args, k, slo_ms, static)
    # the adaptive plan expects the runs' calls: jobs of --job-size items sharing a deadline
    plan = {**(lb.classifier_args(args, family).get("plan") or {}),
            "job_size": settings.job_size}
    adapt = lb.with_classifier(args, family, policy=settings.policy, num_replicas=k, plan=plan,
                               default_slo_ms=slo_ms)
    return BenchConfigs(args, static_cfg, adapt)


def spec_2x(settings: LiveBenchSettings, live_qps: float) -> TraceSpec:
    """The 2x runs' trace: twice the live capacity (items/s), in calls of the job size."""
    return TraceSpec(settings.trace, 2 * live_qps / settings.job_size, settings.duration_s,
                     seed=settings.seed)
