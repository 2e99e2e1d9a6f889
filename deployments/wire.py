"""Typed messages between the deployments (ingress, preprocess, classifier, controller).

They cross process boundaries through Ray (pickled), so they hold only plain values, tensors,
other dataclasses of this module and frozen plans (`policies.schedulers.plan_types`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from policies.schedulers.plan_types import Plan


class ItemStatus(Enum):
    """How one item ended (the wire `status` of its ClassifyResponse)."""

    OK = "ok"
    DEADLINE_EXCEEDED = "deadline_exceeded"
    SHED = "shed"
    ERROR = "error"


@dataclass(frozen=True)
class InputProblem:
    """Why a request's inputs were rejected (-> HTTP 4xx ErrorResponse)."""

    type: str
    message: str
    field: str | None = None


@dataclass(frozen=True)
class DecodeResult:
    """Decoded items (per-modality tensors, no batch dimension) in request order, or the first
    problem found."""

    items: tuple[dict[str, Any], ...] = ()
    problem: InputProblem | None = None
    deadline_lost: bool = False  # decoding stopped: the call's deadline could no longer be met


@dataclass(frozen=True)
class ClassifyCall:
    """What the ingress asks preprocess to do: decode `inputs` (wire form, one dict per item)
    and have the family's classifier answer them. Times are wall-clock seconds."""

    family: str
    task: str
    inputs: tuple[dict[str, Any], ...]
    item_ids: tuple[str, ...]
    arrival_s: float
    deadline_s: float
    utility: float = 1.0
    min_accuracy: float | None = None
    job_id: str | None = None
    min_service_s: float = 0.0  # the fastest variant's batch-1 time: less slack than this is lost


@dataclass(frozen=True)
class ClassifyOutcome:
    """Preprocess's answer: one result per item, or the input problem that rejected them all."""

    results: tuple[ItemResult, ...] = ()
    problem: InputProblem | None = None


@dataclass(frozen=True)
class WorkItem:
    """One decoded item travelling to a classifier replica. Times are wall-clock seconds
    (`time.time()`), shared by every process on the machine."""

    item_id: str
    task: str
    tensors: dict[str, Any]
    arrival_s: float
    deadline_s: float
    utility: float = 1.0
    min_accuracy: float | None = None
    job_id: str | None = None
    job_size: int = 1


@dataclass(frozen=True)
class ItemDecision:
    """What the replica chose for an item's batch."""

    variant: str
    model: str
    modalities: tuple[str, ...]
    gamma: int
    expected_accuracy: float
    batch_size: int
    queue_ms: float
    compute_ms: float
    deadline_met: bool
    replica: str
    dispatch_ms: float = 0.0  # ingress arrival -> this replica's queue (preprocess, Ray calls)


@dataclass(frozen=True)
class ItemResult:
    """One item's answer from a classifier replica."""

    item_id: str
    status: ItemStatus
    label: int | None = None
    confidence: float | None = None
    label_name: str | None = None
    decision: ItemDecision | None = None
    error: str | None = None
    error_type: str | None = None  # for ERROR: internal_error or replica_unavailable


@dataclass(frozen=True)
class ReplicaReport:
    """A replica's periodic report to the controller. Counters are deltas since the replica's
    last acknowledged report (a restarted replica starts from zero without double counting)."""

    deployment: str
    replica_id: str
    time_s: float
    load_qps: float
    queue_len: int
    counters: dict[str, float] = field(default_factory=dict)
    variant_counts: dict[str, int] = field(default_factory=dict)
    plan_versions: dict[str, str] = field(default_factory=dict)
    policy: str = ""
    slowdown: float = 1.0  # live / profiled batch time the policy plans with (slowdown.py)
    fallbacks: dict[str, str] = field(default_factory=dict)  # task -> why it runs the fallback


@dataclass(frozen=True)
class PlanUpdate:
    """A plan the controller pushes to a replica for one task (`version`: what the replica
    reports holding once it installed it)."""

    task: str
    version: str
    plan: Plan
