"""Shared vocabulary: requests, jobs, batches, SLOs, variants and decisions (frozen dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class SLO:
    """What a request asks for: a latency bound, optionally an accuracy floor and a utility."""

    latency_s: float
    min_accuracy: float | None = None
    utility: float = 1.0

    def __post_init__(self) -> None:
        if self.latency_s <= 0:
            raise ValueError(f"SLO latency must be positive, got {self.latency_s}")
        if self.min_accuracy is not None and not 0.0 <= self.min_accuracy <= 1.0:
            raise ValueError(f"accuracy floor must be in [0, 1], got {self.min_accuracy}")


@dataclass(frozen=True)
class Variant:
    """One way to execute: a model, a subset of modalities and a token change (gamma)."""

    name: str
    model: str = ""
    modalities: frozenset[str] = frozenset()
    gamma: int = 0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("variant name must be non-empty")


@dataclass(frozen=True)
class Request:
    """One inference query. `deadline_s` = arrival + SLO latency."""

    request_id: int
    arrival_s: float
    slo: SLO
    task: str = "default"
    modalities: frozenset[str] = frozenset()
    job_id: int | None = None

    @property
    def deadline_s(self) -> float:
        return self.arrival_s + self.slo.latency_s


@dataclass(frozen=True)
class Job:
    """Several requests sharing SLOs (MOSEL's unit of planning)."""

    job_id: int
    arrival_s: float
    slo: SLO
    num_requests: int

    @property
    def deadline_s(self) -> float:
        return self.arrival_s + self.slo.latency_s


@dataclass(frozen=True)
class Batch:
    """Requests executed together on one variant."""

    requests: tuple[Request, ...]
    variant: Variant

    @property
    def size(self) -> int:
        return len(self.requests)

    @property
    def earliest_deadline_s(self) -> float:
        return min(r.deadline_s for r in self.requests)


class Outcome(Enum):
    """How a request ended (OTAS's four utility outcomes plus an explicit drop)."""

    SERVED_IN_TIME = "served_in_time"
    SERVED_LATE = "served_late"
    DROPPED = "dropped"
