"""The autoscaling decisions as the ingress shows them: `autoscaling` in /v1/status and the
`adaptserve_autoscaling_*` series of its /metrics, read from the application's DecisionLedger
(ledger.py) with a timeout; none when the app does not autoscale (no ledger)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from deployments.autoscaling.ledger import GAUGES, LEDGER_NAMESPACE, TAGS, ledger_name

log = logging.getLogger(__name__)
RECENT_SHOWN = 20


class LedgerView:
    def __init__(self, app_name: str | None, timeout_s: float = 1.0,
                 retry_after_s: float = 5.0) -> None:
        self.app_name = app_name
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self._ledger: Any = None
        self._next_lookup_s = 0.0

    async def _handle(self) -> Any:
        if self._ledger is None and time.monotonic() >= self._next_lookup_s:
            import ray

            self._next_lookup_s = time.monotonic() + self.retry_after_s
            try:
                self._ledger = await asyncio.to_thread(
                    ray.get_actor, ledger_name(self.app_name), namespace=LEDGER_NAMESPACE)
            except ValueError:  # no decision made yet, or no autoscaling in this app
                return None
        return self._ledger

    async def snapshot(self) -> dict[str, Any] | None:
        ledger = await self._handle()
        if ledger is None:
            return None
        try:
            return dict(await asyncio.wait_for(ledger.snapshot.remote(), self.timeout_s))
        except Exception as exc:  # the ledger went with a restarted Serve controller
            log.info("autoscaling ledger unavailable: %s", type(exc).__name__)
            self._ledger = None
            return None


def status_json(snapshot: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """/v1/status's `autoscaling`: the last decision per deployment, the recent changes."""
    if snapshot is None:
        return None
    return {"deployments": snapshot.get("deployments", {}),
            "recent_changes": list(snapshot.get("recent_changes", []))[-RECENT_SHOWN:],
            "scale_events": snapshot.get("scale_events", {}),
            "as_of_s": snapshot.get("time_s")}


class _Collector:
    def __init__(self, snapshot: Mapping[str, Any]) -> None:
        self.snapshot = snapshot

    def collect(self) -> Any:
        latest = self.snapshot.get("deployments", {})
        for key, name in GAUGES.items():
            g = GaugeMetricFamily(name, f"the last autoscaling decision's {key}",
                                  labels=list(TAGS))
            for r in latest.values():
                g.add_metric([str(r.get(t)) for t in TAGS], float(r[key]))
            yield g
        reason = GaugeMetricFamily("adaptserve_autoscaling_reason",
                                   "1: the reason of the last autoscaling decision",
                                   labels=[*TAGS, "reason"])
        for r in latest.values():
            reason.add_metric([*(str(r.get(t)) for t in TAGS), str(r["reason"])], 1.0)
        yield reason
        events = CounterMetricFamily("adaptserve_autoscaling_scale_events",
                                     "changes of the target replica count, by direction",
                                     labels=["deployment", "direction"])
        for name, counts in self.snapshot.get("scale_events", {}).items():
            for way, n in counts.items():
                events.add_metric([name, way], float(n))
        yield events


def prometheus_text(snapshot: Mapping[str, Any] | None) -> str:
    if snapshot is None:
        return ""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(snapshot))
    return generate_latest(registry).decode()
