"""Send work items to a classifier deployment and always come back with one result per item.

A classifier replica may die with items queued (killed, OOM) or be restarting: the call is
retried while the deadline allows; when the deadline (plus a grace for a batch finishing late)
passes without an answer the items are answered deadline_exceeded; when the replicas keep
failing they are answered with an explicit replica_unavailable error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from deployments.handles import await_response
from deployments.wire import ItemResult, ItemStatus, WorkItem

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 3
RETRY_PAUSE_S = 0.05


def _all(items: list[WorkItem], status: ItemStatus, error: str,
         error_type: str | None = None) -> list[ItemResult]:
    return [ItemResult(i.item_id, status, error=error, error_type=error_type) for i in items]


async def submit_with_deadline(handle: Any, items: list[WorkItem], grace_s: float,
                               clock: Callable[[], float] = time.time) -> list[ItemResult]:
    """`handle.submit.remote(items)` with retries, bounded by the items' latest deadline."""
    if not items:
        return []
    deadline_s = max(i.deadline_s for i in items) + grace_s
    last_error = ""
    for attempt in range(1, MAX_ATTEMPTS + 1):
        remaining = deadline_s - clock()
        if remaining <= 0:
            break
        response = handle.submit.remote(items)
        try:
            results = await await_response(response, remaining)
        except TimeoutError:
            response.cancel()
            return _all(items, ItemStatus.DEADLINE_EXCEEDED,
                        "no answer from the classifier before the deadline")
        except Exception as exc:  # replica died / unavailable: try another one
            last_error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            log.warning("classifier call failed (attempt %d): %s", attempt, last_error)
            await asyncio.sleep(RETRY_PAUSE_S)
            continue
        return _check(items, results)
    if last_error:
        return _all(items, ItemStatus.ERROR, f"classifier replica failed: {last_error}",
                    "replica_unavailable")
    return _all(items, ItemStatus.DEADLINE_EXCEEDED,
                "deadline passed while waiting for a classifier replica")



def _check(items: list[WorkItem], results: Any) -> list[ItemResult]:
    """Results in item order; anything missing becomes an explicit internal error."""
    by_id = {r.item_id: r for r in results or []}
    return [by_id.get(i.item_id) or ItemResult(i.item_id, ItemStatus.ERROR,
                                               error="classifier returned no result",
                                               error_type="internal_error")
            for i in items]
