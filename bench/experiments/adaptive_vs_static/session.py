"""Load runs of the live benchmark against the served app: each run's result, the CPU time per
call of every Serve process, and the machine's load average, kept for the report; the capacity
ramp."""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from app.sim.replica.request_metrics import LoadSummary
from app.sim.traces.spec import TraceSpec
from bench.core.client import (
    LoadgenConfig,
    LoadResult,
    Payload,
    payloads_from_model,
    run_load,
    trace_data_dir,
)
from bench.core.probe import serve_cpu_s
from bench.core.run_report import write_json
from bench.experiments.adaptive_vs_static.settings import LiveBenchSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadRun:
    name: str
    url: str
    spec: TraceSpec
    job_size: int = 1


class LiveSession:
    """Drives the server and accumulates what every run left (mutable by design: one session
    spans the benchmark's phases)."""

    def __init__(self, settings: LiveBenchSettings, slo_ms: float, models_dir: str | None,
                 t0: float | None = None) -> None:
        self.settings = settings
        self.slo_ms = slo_ms
        self.models_dir = models_dir
        self.runs: dict[str, LoadResult] = {}
        self.payloads: dict[int, list[Payload]] = {}
        self.loadavg: dict[str, float] = {}
        self.cpu_ms: dict[str, dict[str, float]] = {}
        self.t0 = time.perf_counter() if t0 is None else t0  # of the log's elapsed times

    def log(self, msg: str) -> None:
        log.info("[%6.0f s] %s", time.perf_counter() - self.t0, msg)

    def _config(self, run: LoadRun) -> LoadgenConfig:
        cfg = LoadgenConfig(url=run.url, model=self.settings.family, trace=run.spec,
                            slo_ms=self.slo_ms, timeout_s=max(10.0, 0.02 * self.slo_ms),
                            job_size=run.job_size, min_accuracy=self.settings.min_accuracy,
                            utilities=self.settings.utilities,
                            data_dir=trace_data_dir(run.spec, self.settings.data_dir))
        if run.job_size not in self.payloads:
            self.payloads[run.job_size] = payloads_from_model(cfg, models_dir=self.models_dir)
        return cfg

    def load(self, run: LoadRun) -> LoadSummary:
        return self.load_together([run])[0]

    def load_together(self, runs: list[LoadRun]) -> list[LoadSummary]:
        """Run the load generators at the same time (one thread each), so that the runs see
        the same state of the shared machine."""
        cfgs = [self._config(r) for r in runs]
        cpu0 = serve_cpu_s()
        with ThreadPoolExecutor(len(cfgs)) as pool:
            results = list(pool.map(lambda c: run_load(c, self.payloads[c.job_size]), cfgs))
        cpu1 = serve_cpu_s()
        calls = sum(len(r.records) / c.job_size for r, c in zip(results, cfgs, strict=True))
        # CPU ms per call of each process, over all runs of this batch
        cpu_ms = {k: 1000 * (cpu1[k] - v) / max(calls, 1) for k, v in cpu0.items() if k in cpu1}
        for run, res in zip(runs, results, strict=True):
            self._keep(run, res, cpu_ms)
        return [res.summary for res in results]

    def _keep(self, run: LoadRun, res: LoadResult, cpu_ms: dict[str, float]) -> None:
        self.runs[run.name] = res
        self.cpu_ms[run.name] = dict(cpu_ms)
        self.loadavg[run.name] = os.getloadavg()[0]  # 1-min load average of the shared machine
        write_json(self.settings.records / f"{run.name}.json", res.to_dict())
        s = res.summary
        self.log(f"{run.name}: {run.spec.kind} {run.spec.qps:.1f} calls/s x {run.job_size} -> "
                 f"goodput {s.goodput_qps:.1f}/s, attainment {100 * s.slo_attainment:.1f}% "
                 f"(admitted {100 * s.slo_attainment_admitted:.1f}%), acc "
                 f"{s.accuracy_of_satisfied:.3f}, p50 {s.latency_p50_ms:.0f} ms, errors "
                 f"{s.errors + s.timeouts}, loadavg {self.loadavg[run.name]:.1f}")

    def ramp(self, limit_qps: float, prefix: str = "ramp") -> list[dict[str, Any]]:
        """Runs `<prefix>_<i>`: offered item rate from the ramp start, x the ramp factor, until the
        goodput stops rising (a step adds under 3%), SLO attainment falls below 50%, or the rate
        passes 1.3x the profile's capacity. Capacity = the best goodput seen: the most answers
        within the SLO per second the configuration delivers at any load (not the last load it
        met at 90%, below which a configuration that sheds gracefully still delivers more)."""
        a = self.settings
        rate, steps, best = a.ramp_start_qps, [], 0.0
        for i in range(a.ramp_steps):
            name = f"{prefix}_{i}"
            s = self.load(LoadRun(name, a.base_url,
                                  TraceSpec("poisson", rate / a.job_size, a.ramp_s, seed=a.seed),
                                  a.job_size))
            steps.append({"offered_qps": s.offered_qps, "goodput_qps": s.goodput_qps,
                          "attainment": s.slo_attainment, "run": name})
            rate *= a.ramp_factor
            if (s.goodput_qps < 1.03 * best or s.slo_attainment < 0.5
                    or rate > 1.3 * limit_qps):
                break
            best = max(best, s.goodput_qps)
        return steps
