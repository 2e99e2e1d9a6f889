"""Where the autoscaling decisions go, out of Serve's controller.

The policies run inside Serve's controller every 0.1 s; they must not block it. Each call hands
its decision records to a `Publisher` (a dict write under a lock, microseconds); the publisher's
daemon thread (as Serve's own PrometheusQueryMixin refreshes in a thread) does the Ray work at
most every `interval_s`:
- pushes the records, fire-and-forget, to a `DecisionLedger` actor named per application
  (`ledger_name`, namespace LEDGER_NAMESPACE; created by the thread, owned by Serve's
  controller, so it lives and dies with it), which keeps the last decision per deployment and
  the recent changes of target;
- sets Ray metrics (ray.util.metrics gauges, exported by Ray's metrics agent as
  `ray_adaptserve_autoscaling_*`).
The ingress reads the ledger for /v1/status and its /metrics (view.py). Outside a Ray worker
(unit tests, the decision benchmark) the thread does nothing.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from typing import Any

import ray

from policies.autoscaling import Reason

log = logging.getLogger(__name__)
LEDGER_NAMESPACE = "adaptserve"
RECENT = 256
GAUGES = {"load_per_s": "adaptserve_autoscaling_load_per_s",
          "capacity_per_s": "adaptserve_autoscaling_capacity_per_s",
          "desired": "adaptserve_autoscaling_desired_replicas",
          "target": "adaptserve_autoscaling_target_replicas",
          "running": "adaptserve_autoscaling_running_replicas"}
TAGS = ("deployment", "application", "stage")


def ledger_name(app_name: str | None) -> str:
    return f"autoscaling_decisions:{app_name or 'default'}"


class DecisionLog:
    """The last decision per deployment, the recent changes (of target or reason) and the
    count of scale-ups and -downs per deployment, in memory (the ledger actor's state)."""

    def __init__(self) -> None:
        self.latest: dict[str, dict[str, Any]] = {}
        self.changes: deque[dict[str, Any]] = deque(maxlen=RECENT)
        self.scale_events: dict[str, dict[str, int]] = {}

    def record(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            name = str(r.get("deployment"))
            last = self.latest.get(name)
            if last is None or last.get("target") != r.get("target") or (
                    last.get("reason") != r.get("reason")):
                self.changes.append(r)
            if r.get("target") != r.get("previous_target"):
                way = "up" if r["target"] > r["previous_target"] else "down"
                counts = self.scale_events.setdefault(name, {"up": 0, "down": 0})
                counts[way] += 1
            self.latest[name] = r

    def snapshot(self) -> dict[str, Any]:
        return {"time_s": time.time(), "deployments": dict(self.latest),
                "recent_changes": list(self.changes), "scale_events": dict(self.scale_events)}


DecisionLedger = ray.remote(num_cpus=0, max_restarts=0)(DecisionLog)


class Publisher:
    """The records of the latest decision per deployment, published by a daemon thread."""

    def __init__(self, app_name: str | None, interval_s: float = 0.5) -> None:
        self.app_name = app_name
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._pending: dict[str, dict[str, Any]] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._started = False

    def offer(self, records: list[dict[str, Any]]) -> None:
        """Called by the policy: keep the newest record per deployment; wake the thread when
        a target changes (published at once, not at the next tick)."""
        changed = False
        with self._lock:
            for r in records:
                self._pending[str(r["deployment"])] = r
                changed = changed or r["target"] != r["previous_target"]
            if not self._started:
                self._started = True
                self._start()
        if changed:
            self._wake.set()

    def _start(self) -> None:
        state = _ThreadState(self.app_name, self.interval_s, self._lock, self._pending,
                             self._wake, self._stop)
        threading.Thread(target=_publish_forever, args=(state,), daemon=True,
                         name="adaptserve-autoscaling-publish").start()
        weakref.finalize(self, self._stop.set)  # the policy replaced: its thread ends


class _ThreadState:
    """What the thread shares with its Publisher (no reference back to the Publisher, so a
    replaced policy is collected and its thread stopped)."""

    def __init__(self, app_name: str | None, interval_s: float, lock: threading.Lock,
                 pending: dict[str, dict[str, Any]], wake: threading.Event,
                 stop: threading.Event) -> None:
        self.app_name, self.interval_s = app_name, interval_s
        self.lock, self.pending, self.wake, self.stop = lock, pending, wake, stop
        self.ledger: Any = None
        self.gauges: dict[str, Any] | None = None
        self.retry_at_s = 0.0


def _publish_forever(s: _ThreadState) -> None:
    while not s.stop.is_set():
        s.wake.wait(s.interval_s)
        s.wake.clear()
        with s.lock:
            records = list(s.pending.values())
            s.pending.clear()
        if records and ray.is_initialized():
            try:
                _publish(s, records)
            except Exception as exc:  # never let the thread die; try again later
                log.warning("publishing autoscaling decisions failed: %s", exc)
                s.ledger = None
                s.retry_at_s = time.monotonic() + 5.0


def _publish(s: _ThreadState, records: list[dict[str, Any]]) -> None:
    if s.ledger is None and time.monotonic() >= s.retry_at_s:
        s.ledger = DecisionLedger.options(
            name=ledger_name(s.app_name), namespace=LEDGER_NAMESPACE, get_if_exists=True,
            lifetime=None).remote()
    if s.ledger is not None:
        s.ledger.record.remote(records)  # fire and forget
    _set_gauges(s, records)


def _set_gauges(s: _ThreadState, records: list[dict[str, Any]]) -> None:
    from ray.util.metrics import Gauge

    if s.gauges is None:
        s.gauges = {k: Gauge(name, description=f"autoscaling decision: {k}", tag_keys=TAGS)
                    for k, name in GAUGES.items()}
        s.gauges["reason"] = Gauge("adaptserve_autoscaling_reason",
                                   description="1 for the reason of the last decision",
                                   tag_keys=(*TAGS, "reason"))
    for r in records:
        tags = {k: str(r.get(k)) for k in TAGS}
        for key in GAUGES:
            s.gauges[key].set(float(r[key]), tags=tags)
        for reason in Reason:  # one series per reason: 1 for the last decision's, else 0
            s.gauges["reason"].set(1.0 if reason.value == r["reason"] else 0.0,
                                   tags={**tags, "reason": reason.value})
