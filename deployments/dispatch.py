"""Calls to a replica that always come back with one result per item.

A replica may die with items queued (killed, OOM) or be restarting: the call is retried while
the deadline allows; when the deadline (plus a grace for a batch finishing late) passes without
an answer the items are answered deadline_exceeded; when the replicas keep failing they are
answered with an explicit replica_unavailable error. Two callers share that loop:
`submit_with_deadline` (decoded items to a classifier's `submit`, from preprocess) and the
ingress's coalescer (`ClassifyCall`s to a classifier's or preprocess's `classify_many`;
`classify_outcome` turns how that ended into one result per item).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deployments.handles import await_response
from deployments.wire import ClassifyCall, ClassifyOutcome, ItemResult, ItemStatus, WorkItem

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
RETRY_PAUSE_S = 0.05


@dataclass(frozen=True)
class Attempt:
    """How a retried call ended: its value, or why there is none (`timed_out`: the deadline
    passed while waiting for an answer or for a replica; `error`: the last replica failure)."""

    value: Any = None
    answered: bool = False
    error: str = ""


async def call_until(send: Callable[[], Any], deadline_s: float,
                     clock: Callable[[], float] = time.time) -> Attempt:
    """`send()` (a DeploymentResponse) awaited until `deadline_s`; a failed replica is tried
    again (Serve routes the retry to another replica or the restarted one)."""
    last_error = ""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        remaining = deadline_s - clock()
        if remaining <= 0:
            break
        response = send()
        try:
            return Attempt(await await_response(response, remaining), answered=True)
        except TimeoutError:
            response.cancel()
            return Attempt()
        except Exception as exc:  # replica died / unavailable: try another one
            last_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            log.warning("replica call failed (attempt %d): %s", attempt, last_error)
            await asyncio.sleep(RETRY_PAUSE_S)
    return Attempt(error=last_error)


def _all(ids: list[str], status: ItemStatus, error: str,
         error_type: str | None = None) -> list[ItemResult]:
    return [ItemResult(i, status, error=error, error_type=error_type) for i in ids]


def _unanswered(ids: list[str], attempt: Attempt) -> list[ItemResult]:
    if attempt.error:
        return _all(ids, ItemStatus.ERROR, f"classifier replica failed: {attempt.error}",
                    "replica_unavailable")
    return _all(ids, ItemStatus.DEADLINE_EXCEEDED,
                "no answer from the classifier before the deadline")


async def submit_with_deadline(handle: Any, items: list[WorkItem], grace_s: float,
                               clock: Callable[[], float] = time.time) -> list[ItemResult]:
    """`handle.submit.remote(items)` with retries, bounded by the items' latest deadline."""
    if not items:
        return []
    deadline_s = max(i.deadline_s for i in items) + grace_s
    attempt = await call_until(lambda: handle.submit.remote(items), deadline_s, clock)
    ids = [i.item_id for i in items]
    return _check(ids, attempt.value) if attempt.answered else _unanswered(ids, attempt)


def classify_outcome(call: ClassifyCall, attempt: Attempt) -> ClassifyOutcome:
    """The call's outcome from how its attempt ended: one result per item, in order."""
    ids = list(call.item_ids)
    if not attempt.answered:
        return ClassifyOutcome(results=tuple(_unanswered(ids, attempt)))
    outcome: ClassifyOutcome = attempt.value
    if outcome.problem is not None:
        return outcome
    return ClassifyOutcome(results=tuple(_check(ids, outcome.results)))


def _check(ids: list[str], results: Any) -> list[ItemResult]:
    """Results in item order; anything missing becomes an explicit internal error."""
    by_id = {r.item_id: r for r in results or []}
    return [by_id.get(i) or ItemResult(i, ItemStatus.ERROR,
                                       error="classifier returned no result",
                                       error_type="internal_error")
            for i in ids]
