"""Settings of the replica simulator (app/sim/replica/sim.py)."""

from __future__ import annotations

from dataclasses import dataclass

from app.sim.replica.utilities import check_utilities
from policies.admission import LimiterSettings
from policies.profile import PERCENTILES

ROUTINGS = ("pow2", "round_robin")
SERVICE_MODES = (*PERCENTILES, "sampled")


@dataclass(frozen=True)
class SchedulerSimConfig:
    replicas: int
    slo_ms: float
    routing: str = "pow2"
    service: str = "p50"
    max_batch_size: int | None = None
    overhead_ms: float = 0.0
    load_window_s: float = 1.0
    load_scope: str = "replica"  # "replica": the replica's arrivals; "deployment": all arrivals
    max_ongoing: int | None = None
    max_queued_items: int | None = None
    expire_at_deadline: bool = True
    task: str = "default"
    min_accuracy: float | None = None
    utilities: tuple[float, ...] = ()  # per call, cyclic (utilities.py); (): 1.0 each
    job_size: int = 1
    front_ms_per_call: float = 0.0
    front_ms_per_item: float = 0.0
    front_servers: int = 1
    front_ms_per_refusal: float = 0.0  # front-stage work of a call the front door refuses
    front_door: LimiterSettings | None = None  # the proxy's per-family concurrency limit
    latency_feedback: bool = False  # as the live replica loop's option (slowdown.py)
    response_margin_ms: float = 0.0  # as the ingress's: replicas schedule for SLO - margin
    seed: int = 0

    def __post_init__(self) -> None:
        if self.replicas < 1:
            raise ValueError(f"need at least one replica, got {self.replicas}")
        if self.routing not in ROUTINGS:
            raise ValueError(f"unknown routing {self.routing!r}; valid: {list(ROUTINGS)}")
        if self.service not in SERVICE_MODES:
            raise ValueError(f"unknown service mode {self.service!r}; valid: {list(SERVICE_MODES)}")
        if self.load_scope not in ("replica", "deployment"):
            raise ValueError(f"unknown load scope {self.load_scope!r}; "
                             "valid: ['replica', 'deployment']")
        if self.max_queued_items is not None and self.max_queued_items < 1:
            raise ValueError(f"max_queued_items must be >= 1, got {self.max_queued_items}")
        if self.job_size < 1:
            raise ValueError(f"job size must be >= 1, got {self.job_size}")
        check_utilities(self.utilities)
        if self.front_servers < 1:
            raise ValueError(f"need at least one front server, got {self.front_servers}")

    @property
    def front_s(self) -> float:
        """Front-stage service time of one call (0: no front stage)."""
        return (self.front_ms_per_call + self.front_ms_per_item * self.job_size) / 1000.0

    @property
    def budget_s(self) -> float:
        """The replicas' deadline after the ingress: the SLO less the response margin (at most
        half the SLO), as the ingress sets it."""
        return (self.slo_ms - min(self.response_margin_ms, self.slo_ms / 2)) / 1000.0
