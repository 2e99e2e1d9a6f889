"""Classifier replicas: one Serve deployment per model family (options from `ClassifierConfig`).

Each replica loads its family's weights (CUDA when the replica sees a GPU) and serves
`submit(items)` through a `ReplicaLoop` (deadline queue + scheduler + one model thread). The
builder hands it what it needs as arguments: where the model's files are and their fingerprint
(it loads them itself and refuses files that differ), each task's profile and plan. A background task reports stats to the controller every
`controller.interval_s` and applies the plans it answers with; when the controller is
unreachable the replica keeps its last plans.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from ray import serve

from deployments.autoscaling.decisions import ITEMS
from deployments.autoscaling.reporting import ArrivalRates
from deployments.classifier.config import ClassifierConfig
from deployments.classifier.loop import LoopSettings, ReplicaLoop
from deployments.classifier.policy_setup import (
    TaskPlan,
    TaskPolicy,
    apply_update,
    build_policies,
)
from deployments.config import ControllerConfig
from deployments.decode import deadline_lost, decode_items, lost_results, work_items
from deployments.models.loading import ModelRef
from deployments.wire import (
    ClassifyCall,
    ClassifyOutcome,
    ItemResult,
    PlanUpdate,
    ReplicaReport,
    WorkItem,
)
from policies.profile import Profile
from policies.types import Variant

log = logging.getLogger(__name__)


def pick_device(setting: str) -> torch.device:
    if setting == "cuda" or (setting == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


def load_family(ref: ModelRef, device: torch.device) -> Any:
    from deployments.models.loading import load_ref

    return load_ref(ref, device=str(device))


def warm_up(model: Any, tasks: tuple[str, ...],
            run_batch: Callable[[Variant, str, list[dict[str, Any]]], list[Any]]) -> None:
    """Run every variant once on a probe item, so the first request does not pay torch's
    lazy initialisation (it can cost tens of ms, more than a tight SLO)."""
    try:
        for task in tasks:
            item = model.decode(model.probe_inputs(task), task)
            for variant in model.variants():
                run_batch(variant, task, [item])
    except Exception:  # warm-up is an optimisation; serving must not depend on it
        log.warning("warm-up failed", exc_info=True)


def profile_lookup(profiles: dict[str, Profile]) -> Callable[[str, str, int], float | None]:
    """(task, variant, batch size) -> the profiled p50 ms (None where not profiled)."""
    tables = {t: prof.p50_ms_table() for t, prof in profiles.items()}
    return lambda task, variant, size: tables.get(task, {}).get((variant, size))


def replica_id() -> str:
    try:
        return serve.get_replica_context().replica_tag
    except Exception:  # outside Serve (unit use)
        return f"local-{id(object()):x}"


@serve.deployment(max_ongoing_requests=2048)
class Classifier:
    """A thin Serve shell around `ReplicaLoop`."""

    # Serve supports an async constructor; it lets the replica start its reporting task.
    async def __init__(self, cfg: dict[str, Any], model: ModelRef,  # type: ignore[misc]
                       profiles: dict[str, Profile], plans: dict[str, TaskPlan],
                       controller_cfg: dict[str, Any], controller: Any = None) -> None:
        """`model`: where the family's model files are; `profiles`: task -> profile of every task
        served; `plans`: task -> the plan the policy reads (empty when it reads none)."""
        self.cfg = ClassifierConfig.model_validate(cfg)
        torch.set_num_threads(self.cfg.threads)
        self.controller_cfg = ControllerConfig.model_validate(controller_cfg)
        self.controller = controller
        self.device = pick_device(self.cfg.device)
        self.model = await asyncio.to_thread(load_family, model, self.device)
        self.label_names = {t: self.model.label_names(t) for t in self.model.tasks()}
        self.profiles = dict(profiles)
        self.policies: dict[str, TaskPolicy] = build_policies(self.cfg, self.profiles, plans)
        self.replica_id = replica_id()
        settings = LoopSettings(self.replica_id, self.cfg.max_queued_items,
                                self.controller_cfg.window_s, self.cfg.latency_feedback)
        self.loop = ReplicaLoop(settings, {t: p.scheduler for t, p in self.policies.items()},
                                self._run_batch, profile_ms=profile_lookup(self.profiles))
        await self.loop.run_in_worker(warm_up, self.model, tuple(self.profiles), self._run_batch)
        a = self.cfg.autoscaling  # items/s where calls arrive, from now (reporting.py)
        self.arrivals = ArrivalRates((ITEMS,), a.rate_window_s if a else settings.window_s)
        self._reporter = asyncio.get_running_loop().create_task(self._report_forever())
        log.info("classifier %s replica %s ready on %s (model files %s, fingerprint %s, "
                 "policies %s)", self.cfg.name, self.replica_id, self.device, list(model.paths),
                 model.fingerprint[:12],
                 {t: p.scheduler.name for t, p in self.policies.items()})

    def _run_batch(self, variant: Variant, task: str,
                   items: list[dict[str, Any]]) -> list[Any]:
        items = [{k: self._tensor(v) for k, v in it.items()} for it in items]
        with torch.inference_mode():
            preds = self.model.run(variant, task, items)
        names = self.label_names.get(task)
        return [p if names is None or not 0 <= p.label < len(names)
                else dataclasses.replace(p, name=names[p.label]) for p in preds]

    def _tensor(self, value: Any) -> Any:
        """Items arrive with numpy arrays (see `preprocess.to_wire`); models take tensors."""
        if isinstance(value, np.ndarray):  # zero-copy buffers may be read-only
            value = torch.from_numpy(value if value.flags.writeable else value.copy())
        if isinstance(value, torch.Tensor) and self.device.type != "cpu":
            value = value.to(self.device)
        return value

    def ping(self) -> str:
        """Cheap call callers use to warm their handle (router set-up) before real traffic."""
        return self.replica_id

    async def submit(self, items: list[WorkItem]) -> list[ItemResult]:
        """Queue decoded items (from the preprocess deployment) and return one result per item,
        in order."""
        self.arrivals.add(ITEMS, len(items))
        return await self.loop.submit(items)

    async def classify(self, call: ClassifyCall) -> ClassifyOutcome:
        """A request or job straight from the ingress: decode here (on a worker thread, off the
        event loop), queue, answer one result per item in order. Work whose deadline is lost
        (before or while decoding) is answered deadline_exceeded without decoding the rest."""
        self.arrivals.add(ITEMS, len(call.inputs))
        lost = deadline_lost(call)
        if lost():
            return ClassifyOutcome(results=self._lost(call))
        decoded = await asyncio.to_thread(decode_items, self.model, call.task, call.inputs, lost)
        self.loop.counters.decoded(len(decoded.items))
        if decoded.problem is not None:
            return ClassifyOutcome(problem=decoded.problem)
        if decoded.deadline_lost or lost():
            return ClassifyOutcome(results=self._lost(call))
        return ClassifyOutcome(results=tuple(await self.loop.submit(
            work_items(call, decoded.items))))

    def _lost(self, call: ClassifyCall) -> tuple[ItemResult, ...]:
        """deadline_exceeded for every item of a call whose deadline was lost before it was
        queued, counted as arrived and answered (so /v1/status counts what clients see)."""
        results = lost_results(call)
        self.loop.counters.arrived(len(results))
        for r in results:
            self.loop.counters.answered(r)
        return results

    async def classify_many(self, calls: list[ClassifyCall]) -> list[ClassifyOutcome]:
        """Calls the ingress coalesced into one handle call (deployments/ingress/classify/coalesce.py):
        each answered as `classify` would, in order."""
        return list(await asyncio.gather(*(self.classify(c) for c in calls)))

    # ---- control plane ------------------------------------------------------------------
    def update_plan(self, update: PlanUpdate) -> bool:
        """Install a plan for one task (called with the controller's answer to a report).
        Returns whether it was installed; a plan the policy does not run leaves the previous."""
        current = self.policies.get(update.task)
        if current is None:
            return False
        try:
            new = apply_update(self.cfg, self.profiles[update.task], current, update)
        except ValueError:
            log.exception("plan %s for task %s rejected", update.version, update.task)
            return False
        self.policies[update.task] = new
        self.loop.schedulers[update.task] = new.scheduler
        return True

    def fallbacks(self) -> dict[str, str]:
        """Task -> why it runs the fallback policy (empty when every task runs its own)."""
        return {t: p.fallback_reason for t, p in self.policies.items()
                if p.fallback_reason is not None}

    def report(self) -> ReplicaReport:
        """A report with the counters since the last one (the caller must `restore` on loss)."""
        values, variants = self.loop.counters.take()
        return ReplicaReport(
            deployment=self.cfg.name, replica_id=self.replica_id, time_s=time.time(),
            load_qps=self.loop.load_qps(), queue_len=len(self.loop.queue), counters=values,
            variant_counts=variants, policy=self.cfg.policy, slowdown=self.loop.slowdown_factor(),
            plan_versions={t: p.plan_version for t, p in self.policies.items()},
            fallbacks=self.fallbacks())

    async def _report_forever(self) -> None:
        while True:
            await asyncio.sleep(self.controller_cfg.interval_s)
            if self.controller is not None:
                await self._report_once()

    async def _report_once(self) -> None:
        rep = self.report()
        try:
            updates = await asyncio.wait_for(self.controller.report.remote(rep),
                                             timeout=max(self.controller_cfg.interval_s, 1.0))
        except Exception as exc:  # controller down or slow: keep serving on the last plan
            self.loop.counters.restore(rep.counters, rep.variant_counts)
            log.warning("controller unreachable (%s); keeping current plans", type(exc).__name__)
            return
        for update in updates or []:
            self.update_plan(update)

    def stats(self) -> dict[str, Any]:
        """Current load and queue state (does not consume the counters)."""
        return {"replica": self.replica_id, "deployment": self.cfg.name,
                "load_qps": self.loop.load_qps(), "queue_len": len(self.loop.queue),
                "slowdown": self.loop.slowdown_factor(),
                "policies": {t: p.scheduler.name for t, p in self.policies.items()},
                "plan_versions": {t: p.plan_version for t, p in self.policies.items()},
                "fallbacks": self.fallbacks()}

    def record_autoscaling_stats(self) -> dict[str, float]:
        """Custom autoscaling metrics (Serve calls this when the deployment autoscales): items/s
        arriving at this replica (`items_per_s`, what the policy sums: deployments/autoscaling/)
        over `autoscaling.rate_window_s` since the replica was ready, and the queue and the
        loop's own rate."""
        return {**self.arrivals.rates(), "queue_len": float(len(self.loop.queue)),
                "load_qps": self.loop.load_qps()}

    async def __del__(self) -> None:
        self._reporter.cancel()
        await self.loop.stop()
