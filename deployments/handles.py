"""Awaiting a Serve `DeploymentResponse` with a time bound (the one helper every shell uses),
and warming a handle before real traffic."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

log = logging.getLogger(__name__)


async def _resolve(response: Any) -> Any:
    # asyncio.wait_for wants a coroutine; a DeploymentResponse is only awaitable.
    return await response


async def await_response(response: Any, timeout_s: float) -> Any:
    """The response's value, or `TimeoutError` after `timeout_s` (the call is not cancelled
    downstream: Serve has no cancellation we rely on here)."""
    return await asyncio.wait_for(_resolve(response), timeout=timeout_s)


async def warm_handles(handles: dict[str, Any], ready: set[str] | None = None,
                       timeout_s: float = 600.0) -> None:
    """Call `ping` on each handle until it answers, adding its name to `ready`: the first call
    through a handle sets up its router, which would otherwise land on (and can exceed the SLO
    of) the first real request; `ready` also tells health checks when the graph is up. It lives
    here, not in preprocess, so the ingress can warm its handle without importing torch."""
    for name, handle in handles.items():
        try:
            await await_response(handle.ping.remote(), timeout_s)
        except Exception as exc:
            log.warning("warming the handle of %s failed: %s", name, type(exc).__name__)
            continue
        if ready is not None:
            ready.add(name)
