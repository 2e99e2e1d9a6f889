"""Settings of the reliability benchmark (bench/experiments/reliability/run.py; python -m bench reliability
parses them from its command line) and its phases."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.experiments.adaptive_vs_static.settings import LocalServe

# the default run, in this order (the kills last: they disturb the app the most)
PHASES = ("quiet", "slowloris", "slow_headers", "chunked", "malformed", "kill_classifier",
          "kill_controller")
ALL_PHASES = (*PHASES, "soak")  # soak: a separate long phase, only when asked
NEEDS_QUIET = ("slowloris", "slow_headers", "chunked", "kill_classifier", "kill_controller")
FRONT_FIGURES = Path("docs/data_front_5939acc.json")  # the measured single-request capacity


@dataclass(frozen=True)
class ReliabilitySettings(LocalServe):
    config: Path = Path("serve_config.yaml")
    port: int = 8140  # the private Serve's HTTP port
    families: tuple[str, ...] = ("vit", "fusion", "family")
    single_qps: float = 10.0  # per family
    phases: tuple[str, ...] = PHASES
    warmup_s: float = 5.0
    phase_s: float = 15.0  # each phase's single requests (slowloris: at least the timeout + 10)
    slow_clients: int = 1000
    slow_length: int = 10_000  # the Content-Length the slow clients announce
    slow_period_s: float = 1.0  # one body byte per this
    slow_header_clients: int = 1000
    slow_header_s: float = 30.0  # the slow-header phase (the clients give up at its end)
    chunked_mb: float = 400.0
    chunk_bytes: int = 64 * 1024
    kill_s: float = 35.0  # each kill phase's single requests
    kill_at_s: float = 3.0  # the kill, this long into the phase
    kill_family: str = "vit"  # kill_classifier: one replica of this family's classifier
    recover_wait_s: float = 120.0  # after a kill phase: wait this long at most for recovery
    soak_s: float = 600.0
    soak_qps: float | None = None  # None: soak_load x the capacity in front_figures
    soak_load: float = 0.8
    soak_family: str | None = None  # None: the family front_figures measured
    soak_warmup_s: float = 60.0  # the soak's RSS baseline is the minute after this
    soak_window_s: float = 60.0  # first and last window compared
    front_figures: Path = FRONT_FIGURES
    num_cpus: int = 8  # Ray logical CPUs
    settle_s: float = 5.0  # after the deployment, before the first request
    sample_s: float = 0.5  # RSS sampling period
    seed: int = 0
    command: str = ""
