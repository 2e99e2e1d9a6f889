"""Awaiting a Serve `DeploymentResponse` with a time bound (the one helper every shell uses)."""

from __future__ import annotations

import asyncio
from typing import Any


async def _resolve(response: Any) -> Any:
    # asyncio.wait_for wants a coroutine; a DeploymentResponse is only awaitable.
    return await response


async def await_response(response: Any, timeout_s: float) -> Any:
    """The response's value, or `TimeoutError` after `timeout_s` (the call is not cancelled
    downstream: Serve has no cancellation we rely on here)."""
    return await asyncio.wait_for(_resolve(response), timeout=timeout_s)
