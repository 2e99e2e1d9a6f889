"""Memory and CPU time of Ray Serve's processes, read by pid with psutil.

The processes are found in this driver's own process tree (a local Ray started by the driver
holds its raylet, and the raylet its workers), never in another cluster. A Ray worker names
itself `ray::<actor class>` (`ray::<actor class>.<method>` while running a method), so the
Serve actors are the descendants whose title is one of Serve's: its controller, its proxies,
and every replica (`ServeReplica:<app>:<deployment>`). This needs neither Ray's dashboard
(`ray.util.state` queries it) nor Ray's private modules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import psutil

T = TypeVar("T")
TITLE_PREFIX = "ray::"
SERVE_ACTORS = ("ServeReplica:", "ServeController", "ProxyActor")


@dataclass(frozen=True)
class ProcessMemory:
    actor: str  # Ray actor class name, e.g. ServeReplica:adaptserve:Classifier_family
    pid: int
    rss_mib: float


def actor_of(title: str) -> str | None:
    """The Serve actor class a process title names, or None (other Ray workers, agents, and
    everything else). Serve's application and deployment names here contain no dot."""
    if not title.startswith(TITLE_PREFIX):
        return None
    actor = title[len(TITLE_PREFIX):].partition(".")[0].strip()
    return actor if actor.startswith(SERVE_ACTORS) else None


def _serve_processes() -> Iterator[tuple[str, psutil.Process]]:
    for proc in psutil.Process().children(recursive=True):
        try:
            actor = actor_of(" ".join(proc.cmdline()))
        except psutil.Error:
            continue
        if actor is not None:
            yield actor, proc


def serve_memory() -> list[ProcessMemory]:
    """RSS of every live Serve actor process of the Ray instance this driver started
    (replicas, controller, proxy)."""
    out = []
    for actor, proc in _serve_processes():
        try:
            rss = proc.memory_info().rss / 2**20
        except psutil.Error:
            continue
        out.append(ProcessMemory(actor, proc.pid, rss))
    return sorted(out, key=lambda m: m.actor)


def serve_cpu_s() -> dict[str, float]:
    """CPU seconds (user + system) used so far by each live Serve actor process, by actor class
    name (summed over replicas), plus this driver process ("driver": the load generator) and
    the whole machine ("machine")."""
    out: dict[str, float] = {}
    for actor, proc in _serve_processes():
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        out[actor] = out.get(actor, 0.0) + t.user + t.system
    me = psutil.Process().cpu_times()
    out["driver"] = me.user + me.system
    m = psutil.cpu_times()  # the whole machine, every process (Ray's own, other jobs') included
    out["machine"] = m.user + m.system + sum(getattr(m, k, 0.0) for k in ("nice", "irq",
                                                                          "softirq"))
    return out


def app_replicas(mem: list[ProcessMemory], app: str) -> list[ProcessMemory]:
    return [m for m in mem if m.actor.startswith(f"ServeReplica:{app}:")]


class Sampler(Generic[T]):
    """Calls `read()` every `period_s` on a thread while in its `with` block; `samples` holds
    (unix time, reading). E.g. `Sampler(serve_cpu_s, 0.5)` or a memory reading."""

    def __init__(self, read: Callable[[], T], period_s: float) -> None:
        self.read = read
        self.period_s = period_s
        self.samples: list[tuple[float, T]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.time(), self.read()))
            self._stop.wait(self.period_s)

    def __enter__(self) -> Sampler[T]:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
