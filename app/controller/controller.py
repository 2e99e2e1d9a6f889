"""The control plane: `PolicyController` (plain class) and its Serve wrapper `Controller`.

Replicas report every `controller.interval_s` (load, queue length, counter deltas, the plan
versions they hold); the controller sums the fresh replicas' arrival rates into the deployment
load, selects each task's plan for that load (`PlanBook`) and answers the report with the plans
the replica lacks. It keeps the counters behind `GET /v1/status` and `GET /metrics`, and shows
which tasks run their fallback policy (`fallback` in the status, `adaptserve_policy_fallback`). If it is
down, replicas keep serving with the plans they hold; Serve restarts it (counters restart too).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from ray import serve

from app.config import AppConfig
from app.controller.plan_book import PlanBook
from deployments.classifier.counters import COUNTER_NAMES
from deployments.classifier.policy_setup import TaskPlan
from deployments.wire import PlanUpdate, ReplicaReport


@dataclass
class DeploymentState:
    policy: str
    book: PlanBook
    replicas: dict[str, ReplicaReport] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTER_NAMES, 0.0))
    variants: Counter[str] = field(default_factory=Counter)
    selected: dict[str, str] = field(default_factory=dict)


class PolicyController:
    """Aggregates replica reports per deployment and picks plans by load (no Ray inside)."""

    def __init__(self, config: AppConfig, clock: Callable[[], float] = time.time,
                 plans: Mapping[str, Mapping[str, TaskPlan]] | None = None) -> None:
        """`plans`: deployment -> task -> the plan the builder read (as its replicas got it)."""
        self.config = config
        self.clock = clock
        self.started_s = clock()
        plans = plans or {}
        self.deployments = {
            c.name: DeploymentState(c.policy, PlanBook(config.paths.plans_dir, c.name, c.policy,
                                                       plans.get(c.name)))
            for c in config.classifiers}

    def fresh_replicas(self, name: str) -> list[ReplicaReport]:
        now = self.clock()
        stale = self.config.controller.stale_after_s
        return [r for r in self.deployments[name].replicas.values() if now - r.time_s <= stale]

    def load_qps(self, name: str) -> float:
        return sum(r.load_qps for r in self.fresh_replicas(name))

    def report(self, rep: ReplicaReport) -> list[PlanUpdate]:
        """Record a replica's report; return the plans it should install."""
        state = self.deployments.get(rep.deployment)
        if state is None:
            return []
        state.replicas[rep.replica_id] = rep
        for k, v in rep.counters.items():
            state.totals[k] = state.totals.get(k, 0.0) + float(v)
        state.variants.update(rep.variant_counts)
        load = self.load_qps(rep.deployment)
        updates = []
        for task, held in rep.plan_versions.items():
            update = state.book.select(task, load)
            if update is None:
                continue
            state.selected[task] = update.version
            if update.version != held:
                updates.append(update)
        return updates

    def status(self) -> dict[str, Any]:
        return {"time_s": self.clock(), "uptime_s": self.clock() - self.started_s,
                "deployments": {n: self._deployment_status(n) for n in self.deployments}}

    def _deployment_status(self, name: str) -> dict[str, Any]:
        state = self.deployments[name]
        t = state.totals
        answered = t["ok"] + t["deadline_exceeded"] + t["shed"] + t["errors"]
        fresh = self.fresh_replicas(name)
        return {
            "policy": state.policy,
            "load_qps": round(sum(r.load_qps for r in fresh), 3),
            "queue_len": sum(r.queue_len for r in fresh),
            "replicas": [{"replica": r.replica_id, "load_qps": round(r.load_qps, 3),
                          "queue_len": r.queue_len, "plan_versions": r.plan_versions,
                          "fallbacks": r.fallbacks, "slowdown": round(r.slowdown, 3),
                          "age_s": round(self.clock() - r.time_s, 3)} for r in fresh],
            "fallback": fallback_tasks(fresh),
            "counters": {k: int(v) if k != "accuracy_sum" else round(v, 4)
                         for k, v in t.items()},
            "answered": int(answered),
            "slo_attainment": round(t["deadline_met"] / answered, 4) if answered else None,
            "mean_expected_accuracy": round(t["accuracy_sum"] / t["ok"], 4) if t["ok"] else None,
            "variants": dict(state.variants),
            "selected_plans": dict(state.selected),
        }

    def metrics(self) -> Iterator[Any]:
        """Prometheus metric families (see `metrics_text`)."""
        req = CounterMetricFamily("adaptserve_items", "Items answered by classifier replicas",
                                  labels=["deployment", "outcome"])
        var = CounterMetricFamily("adaptserve_variant_items", "Items served per variant",
                                  labels=["deployment", "variant"])
        gauges = {k: GaugeMetricFamily(f"adaptserve_{k}", d, labels=["deployment"]) for k, d in (
            ("load_qps", "Deployment arrival rate (sum of fresh replicas)"),
            ("queue_length", "Queued items over fresh replicas"),
            ("replicas", "Replicas that reported recently"),
            ("slowdown", "Mean live/profiled batch time of fresh replicas (latency feedback)"),
            ("slo_attainment", "Fraction of answered items served within their deadline"),
            ("expected_accuracy", "Mean profiled accuracy of the variants that served items"))}
        for name in self.deployments:
            s = self._deployment_status(name)
            for outcome in ("deadline_met", "late", "deadline_exceeded", "shed", "errors"):
                req.add_metric([name, outcome], s["counters"][outcome])
            for variant, n in s["variants"].items():
                var.add_metric([name, variant], n)
            gauges["load_qps"].add_metric([name], s["load_qps"])
            gauges["queue_length"].add_metric([name], s["queue_len"])
            gauges["replicas"].add_metric([name], len(s["replicas"]))
            gauges["slowdown"].add_metric([name], sum(r["slowdown"] for r in s["replicas"])
                                          / max(len(s["replicas"]), 1))
            gauges["slo_attainment"].add_metric([name], s["slo_attainment"] or 0.0)
            gauges["expected_accuracy"].add_metric([name], s["mean_expected_accuracy"] or 0.0)
        yield req
        yield var
        yield from gauges.values()
        yield self._fallback_gauge()

    def _fallback_gauge(self) -> GaugeMetricFamily:
        gauge = GaugeMetricFamily(
            "adaptserve_policy_fallback",
            "1 while a fresh replica serves the task on its fallback policy (plan file missing)",
            labels=["deployment", "task"])
        for name in self.deployments:
            fresh = self.fresh_replicas(name)
            down = fallback_tasks(fresh)
            for task in sorted({t for r in fresh for t in r.plan_versions} | set(down)):
                gauge.add_metric([name, task], 1.0 if task in down else 0.0)
        return gauge

    def metrics_text(self) -> str:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        return generate_latest(registry).decode()


def fallback_tasks(replicas: list[ReplicaReport]) -> dict[str, str]:
    """Task -> why some of these replicas serve it on the fallback policy."""
    return {t: reason for r in replicas for t, reason in sorted(r.fallbacks.items())}


class _Collector:
    def __init__(self, controller: PolicyController) -> None:
        self.controller = controller

    def collect(self) -> Iterator[Any]:
        return self.controller.metrics()


@serve.deployment(num_replicas=1, max_ongoing_requests=1000)
class Controller:
    """Serve wrapper: one replica, called by classifier replicas and the ingress."""

    def __init__(self, config: dict[str, Any],
                 plans: dict[str, dict[str, TaskPlan]] | None = None) -> None:
        self.core = PolicyController(AppConfig.model_validate(config), plans=plans)

    def report(self, rep: ReplicaReport) -> list[PlanUpdate]:
        return self.core.report(rep)

    def status(self) -> dict[str, Any]:
        return self.core.status()

    def metrics_text(self) -> str:
        return self.core.metrics_text()
