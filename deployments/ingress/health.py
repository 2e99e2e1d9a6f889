"""Which model families have a live replica (policies/liveness.py's state machine, one per
family, in each ingress replica): the probes, the request path's signals, the fast refusal.

The probe is `handle.broadcast("ping")`: one `ping` to every replica the handle's router
knows as running, bypassing the replicas' queues' admission. With no running replica Serve
raises `DeploymentUnavailableError` at once; a call to a replica that died fails at once with
`ActorDiedError` (the router then drops it). A plain `.remote()` call would instead wait in the
router for a replica (Ray 2.60, `ray/serve/_private/router.py`): that wait, bounded only by the
request's deadline, is what made every request during a restart answer `deadline_exceeded`
late instead of `unavailable` at once.

The request path (`WatchedHandle`) tells the state machine when a call to the family raised
(suspect: probe now), when one has waited `slow_call_s` (probe soon: a replica killed with no
call on it fails no call, the router just waits) and when a replica answered (up).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from ray.serve.exceptions import RequestCancelledError

from deployments.ingress.errors import ApiError
from policies.liveness import (
    FamilyHealth,
    LivenessSettings,
    ProbeResult,
    after_answer,
    after_call_failed,
    after_probe,
    after_slow_call,
    starting,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]


async def probe(handle: Any, timeout_s: float) -> ProbeResult:
    """Ping every running replica of the deployment behind `handle`."""
    try:
        answers = await handle.broadcast("ping").results_async(timeout_s=timeout_s,
                                                               return_exceptions=True)
    except TimeoutError:
        return ProbeResult(0, timed_out=True)
    except Exception as exc:  # DeploymentUnavailableError: no running replica
        return ProbeResult(0, error=f"no running replica ({_why(exc)})")
    failures = [a for a in answers if isinstance(a, BaseException)]
    error = _why(failures[0]) if failures else "no running replica"
    return ProbeResult(len(answers) - len(failures), len(failures), error=error)


class FamilyLiveness:
    """Every family's health in this ingress replica (one event loop: no locking).
    `observe(family, health)` is told every change (metrics)."""

    def __init__(self, families: Iterable[str], settings: LivenessSettings | None = None,
                 clock: Callable[[], float] = time.time,
                 observe: Callable[[str, FamilyHealth], None] = lambda f, h: None) -> None:
        self.settings = settings or LivenessSettings()
        self.clock = clock
        self.observe = observe
        self.states = {f: starting(clock()) for f in families}
        self.wake = {f: asyncio.Event() for f in self.states}
        self.waiting: dict[str, set[asyncio.Future[Any]]] = {f: set() for f in self.states}
        self.aborted: set[asyncio.Future[Any]] = set()
        for f, h in self.states.items():
            observe(f, h)

    def _set(self, family: str, health: FamilyHealth) -> None:
        old = self.states[family]
        if health is old:
            return
        self.states[family] = health
        if health.state is not old.state:
            log.warning("family %s: %s -> %s %s", family, old.state.value, health.state.value,
                        health.reason)
            self.observe(family, health)
            if health.refuses:
                self._abort(family)
        if health.next_probe_s < old.next_probe_s:
            self.wake[family].set()

    def refusal(self, family: str) -> ApiError | None:
        """The 503 for a family without a live replica (None: let the request through)."""
        h = self.states.get(family)
        if h is None or not h.refuses:
            return None
        return ApiError("unavailable", f"model {family!r} has no live replica ({h.reason}); "
                        f"down for {self.clock() - h.since_s:.1f} s", "model",
                        retry_after_s=self.settings.retry_after_s)

    def _abort(self, family: str) -> None:
        """The family went down: its requests still waiting (in Serve's router, for a replica
        that is gone) are answered now, by `unless_down`, rather than at their deadline."""
        for waiting in self.waiting[family]:
            self.aborted.add(waiting)
            waiting.cancel()

    async def unless_down(self, family: str, answer: Awaitable[T]) -> T:
        """`answer`'s value, or the family's 503 `unavailable` as soon as it goes down."""
        task = asyncio.ensure_future(answer)
        self.waiting[family].add(task)
        try:
            return await task
        except asyncio.CancelledError:
            if task not in self.aborted:
                raise
            raise ApiError("unavailable", f"model {family!r} lost its last live replica while "
                           "this request waited for an answer", "model",
                           retry_after_s=self.settings.retry_after_s) from None
        finally:
            self.waiting[family].discard(task)
            self.aborted.discard(task)

    def call_failed(self, family: str, exc: BaseException) -> None:
        self._set(family, after_call_failed(self.states[family], _why(exc), self.clock()))

    def answered(self, family: str) -> None:
        self._set(family, after_answer(self.states[family], self.clock()))

    def slow_call(self, family: str) -> None:
        self._set(family, after_slow_call(self.states[family], self.clock(), self.settings))

    def down(self) -> list[str]:
        return [f for f, h in self.states.items() if h.refuses]

    def to_json(self) -> dict[str, dict[str, Any]]:
        now = self.clock()
        return {f: {"state": h.state.value, "healthy": h.healthy,
                    "live_replicas": h.live_replicas, "for_s": round(now - h.since_s, 3),
                    "reason": h.reason} for f, h in self.states.items()}

    async def watch(self, family: str, handle: Any) -> None:
        """Probe `family` forever, when due (the request path may bring that time forward)."""
        s = self.settings
        while True:
            self.wake[family].clear()
            wait_s = self.states[family].next_probe_s - self.clock()
            if wait_s > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake[family].wait(), timeout=wait_s)
                continue
            try:
                result = await probe(handle, s.probe_timeout_s)
            except Exception as exc:  # a fault of ours: never stop watching
                log.exception("probing %s failed", family)
                result = ProbeResult(0, timed_out=True, error=_why(exc))
            self._set(family, after_probe(self.states[family], result, self.clock(), s))

    def start(self, handles: dict[str, Any]) -> list[asyncio.Task[None]]:
        """One watching task per family (keep the list: the loop holds tasks weakly)."""
        loop = asyncio.get_running_loop()
        return [loop.create_task(self.watch(f, handles[f])) for f in self.states]


class WatchedHandle:
    """A family's route handle whose calls tell `liveness` how they ended."""

    def __init__(self, handle: Any, family: str, liveness: FamilyLiveness) -> None:
        self.handle = handle
        self.family = family
        self.liveness = liveness

    def __getattr__(self, method: str) -> _WatchedMethod:
        return _WatchedMethod(getattr(self.handle, method), self)


class _WatchedMethod:
    def __init__(self, method: Any, owner: WatchedHandle) -> None:
        self.method = method
        self.owner = owner

    def remote(self, *args: Any, **kwargs: Any) -> _WatchedResponse:
        return _WatchedResponse(self.method.remote(*args, **kwargs), self.owner)


class _WatchedResponse:
    def __init__(self, response: Any, owner: WatchedHandle) -> None:
        self.response = response
        self.owner = owner

    def __await__(self) -> Any:
        return self._value().__await__()

    async def _value(self) -> Any:
        live, family = self.owner.liveness, self.owner.family
        slow = asyncio.get_running_loop().call_later(live.settings.slow_call_s,
                                                     live.slow_call, family)
        try:
            value = await self.response
        except (asyncio.CancelledError, TimeoutError, RequestCancelledError):
            raise  # the caller gave up waiting: no news about the replica
        except Exception as exc:
            live.call_failed(family, exc)
            raise
        finally:
            slow.cancel()
        live.answered(family)
        return value

    def cancel(self) -> None:
        self.response.cancel()
