"""Decoding a `ClassifyCall`'s wire inputs into per-item tensors, and the deadline test that
stops decoding work whose answer can no longer be on time. Shared by the classifier replicas
(which decode their own requests by default: one hop less per call) and the optional preprocess
deployment (`request_path.decode_at: preprocess`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from deployments.models.base import InputError
from deployments.wire import (
    ClassifyCall,
    DecodeResult,
    InputProblem,
    ItemResult,
    ItemStatus,
    WorkItem,
)

log = logging.getLogger(__name__)


def decode_items(model: Any, task: str, items: tuple[dict[str, Any], ...],
                 lost: Callable[[], bool] = lambda: False) -> DecodeResult:
    """Decode every item with `model.decode`; the first problem found is returned, naming the
    item. Before each item `lost()` is asked whether the call's deadline can still be met: once
    it cannot, the rest is not decoded (a huge job stops costing decode time at its deadline).
    Anything decode raises besides InputError is reported as an internal error."""
    decoded: list[dict[str, Any]] = []
    for i, inputs in enumerate(items):
        if lost():
            return DecodeResult(items=tuple(decoded), deadline_lost=True)
        where = f"items[{i}]" if len(items) > 1 else "inputs"
        try:
            decoded.append(model.decode(inputs, task))
        except InputError as exc:
            return DecodeResult(problem=InputProblem(exc.problem, f"{where}: {exc}", where))
        except Exception as exc:  # a decode bug: answer 500, keep the replica alive
            log.exception("decode failed unexpectedly")
            return DecodeResult(problem=InputProblem(
                "internal_error", f"{where}: decoding failed: {type(exc).__name__}: {exc}",
                where))
    return DecodeResult(items=tuple(decoded))


def deadline_lost(call: ClassifyCall, clock: Callable[[], float] = time.time) -> Callable[[], bool]:
    """Whether `call` can no longer make its deadline: not even the fastest variant on an empty
    replica would finish in time."""
    return lambda: clock() + call.min_service_s > call.deadline_s


def lost_results(call: ClassifyCall) -> tuple[ItemResult, ...]:
    return tuple(ItemResult(i, ItemStatus.DEADLINE_EXCEEDED,
                            error="deadline lost before the item was decoded")
                 for i in call.item_ids)


def work_items(call: ClassifyCall, tensors: tuple[dict[str, Any], ...],
               wire: Callable[[dict[str, Any]], dict[str, Any]] = dict) -> list[WorkItem]:
    """One WorkItem per decoded item (`wire` readies the tensors for a trip between processes;
    none is needed when the classifier decoded them itself)."""
    return [WorkItem(item_id=item_id, task=call.task, tensors=wire(t),
                     arrival_s=call.arrival_s,
                     deadline_s=call.deadline_s, utility=call.utility,
                     min_accuracy=call.min_accuracy, job_id=call.job_id,
                     job_size=len(call.item_ids))
            for item_id, t in zip(call.item_ids, tensors, strict=True)]


def warm_decode(models: dict[str, Any]) -> None:
    """Decode one probe item per family and task (imports image plugins, fills caches), so
    the first request does not pay for it."""
    for name, model in models.items():
        try:
            for task in model.tasks():
                model.decode(model.probe_inputs(task), task)
        except Exception:  # an optimisation only
            log.warning("decode warm-up of %s failed", name, exc_info=True)
