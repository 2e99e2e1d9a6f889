"""Awaiting a Serve `DeploymentResponse` with a time bound (the one helper every shell uses),
and warming a handle before real traffic."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Literal

log = logging.getLogger(__name__)


async def _resolve(response: Any) -> Any:
    # asyncio.wait_for wants a coroutine; a DeploymentResponse is only awaitable.
    return await response


async def await_response(response: Any, timeout_s: float) -> Any:
    """The response's value, or `TimeoutError` after `timeout_s` (the call is not cancelled
    downstream: Serve has no cancellation we rely on here)."""
    return await asyncio.wait_for(_resolve(response), timeout=timeout_s)


Transport = Literal["grpc", "object_store"]


def with_transport(handle: Any, transport: Transport) -> Any:
    """The handle with calls sent over `transport`: "grpc" (Serve's inter-deployment gRPC, the
    arguments and result pickled into the message) or "object_store" (Serve's default, through
    Ray's actor calls and object store). For our small messages gRPC costs less CPU on both
    ends (measured in docs/front.md)."""
    return handle.options(_by_reference=False) if transport == "grpc" else handle


async def warm_handles(handles: dict[str, Any], ready: set[str] | None = None,
                       timeout_s: float = 600.0, pause_s: float = 1.0) -> None:
    """Call `ping` on each handle until it answers (or `timeout_s` passes), adding its name to
    `ready`: the first call through a handle sets up its router, which would otherwise land on
    (and can exceed the SLO of) the first real request; `ready` also tells health checks when
    the graph is up. It lives here, not in a torch-importing shell, so the ingress can use it."""
    deadline_s = time.monotonic() + timeout_s
    for name, handle in handles.items():
        while True:
            try:
                await await_response(handle.ping.remote(), max(deadline_s - time.monotonic(),
                                                               0.1))
            except Exception as exc:
                if time.monotonic() + pause_s >= deadline_s:
                    log.warning("warming the handle of %s failed: %s", name,
                                type(exc).__name__)
                    break
                await asyncio.sleep(pause_s)
                continue
            if ready is not None:
                ready.add(name)
            break
