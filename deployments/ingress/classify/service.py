"""Request handling behind the HTTP routes: validate, check against the catalog, admit (or
refuse before any decode or model time), call the family's route (its classifier deployment,
which decodes and answers; or the preprocess deployment, which decodes and forwards), and shape
the answer. Raises `ApiError` for anything that must become a 4xx/5xx ErrorResponse.
Deadlines count from the request's arrival (`clock.Arrival`: the X-Request-Start header when
believed), so the time before the ingress handler is part of the answer's latency."""

from __future__ import annotations

import time
import uuid
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from deployments.ingress.classify.admission import Admission
from deployments.ingress.classify.catalog import Catalog, FamilyInfo, TaskInfo
from deployments.ingress.classify.coalesce import Coalescer
from deployments.ingress.classify.schemas import (
    ClassifyRequest,
    ClassifyResponse,
    Decision,
    JobRequest,
    JobResponse,
    PredictionOut,
    SLOSpec,
)
from deployments.ingress.clock import Arrival
from deployments.ingress.config import HttpConfig
from deployments.ingress.errors import ApiError, from_validation
from deployments.ingress.health import FamilyLiveness
from deployments.ingress.metrics import IngressMetrics
from deployments.ingress.proxy.strict_json import JsonLimits, JsonProblem, loads_strict
from deployments.wire import ClassifyCall, ItemResult, ItemStatus

M = TypeVar("M", bound=BaseModel)
ROUTE_MARGIN_S = 1.0  # the route's own grace for a late batch comes first


def parse_body(body: bytes, schema: type[M], max_body_bytes: int,
               limits: JsonLimits | None = None) -> M:
    """Strict JSON (proxy/strict_json.py: no NaN/Infinity, bounded depth and numbers; 400) validated
    by `schema` (422)."""
    if len(body) > max_body_bytes:
        raise ApiError("payload_too_large",
                       f"request body is {len(body)} bytes; the limit is {max_body_bytes}")
    try:
        data = loads_strict(body, limits or JsonLimits())
    except JsonProblem as exc:
        raise ApiError(exc.type, exc.message) from None
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise from_validation(exc) from None


def resolve(catalog: Catalog, model: str, task: str | None, slo: SLOSpec,
            budget_ms: float | None = None, fastest_answer_ms: float = 0.0
            ) -> tuple[FamilyInfo, TaskInfo]:
    """The family and task a request names; 422 slo_unachievable when its budget (the SLO less
    the response margin) is below what the server can ever do: the fastest variant's profiled
    batch-1 time, or the fastest answer the path has given this family (model run included)."""
    family = catalog.get(model)
    if family is None:
        raise ApiError("unknown_model", f"model {model!r} is not served; valid: {catalog.names()}",
                       "model")
    info = family.task(task or family.default_task)
    if info is None:
        raise ApiError("unknown_task", f"task {task!r} is not a task of {model!r}; valid: "
                       f"{family.task_names()}", "task")
    fastest = info.fastest()
    budget = slo.latency_ms if budget_ms is None else budget_ms
    margin = slo.latency_ms - budget
    if budget < fastest.latency_ms:
        raise ApiError("slo_unachievable",
                       f"SLO {slo.latency_ms:g} ms is below the fastest variant of {model}/"
                       f"{info.task} ({fastest.name}: {fastest.latency_ms:.3f} ms at batch 1, "
                       f"{family.percentile}); ask for at least "
                       f"{fastest.latency_ms + margin:.3f} ms", "slo.latency_ms")
    if budget < fastest_answer_ms:
        raise ApiError("slo_unachievable",
                       f"SLO {slo.latency_ms:g} ms is below the fastest answer this server has "
                       f"given {model} lately ({fastest_answer_ms:.1f} ms from entering the "
                       f"ingress: {fastest.name} {fastest.latency_ms:.3f} ms plus the hops); ask "
                       f"for at least {fastest_answer_ms + margin:.1f} ms", "slo.latency_ms")
    return family, info


def check_modalities(family: FamilyInfo, inputs: dict[str, Any], where: str) -> None:
    unknown = sorted(set(inputs) - set(family.modalities))
    if unknown:
        raise ApiError("unknown_modality", f"{where}: unknown modality {unknown}; "
                       f"{family.name} takes {list(family.modalities)}", where)
    missing = [m for m in family.modalities if m not in inputs]
    if missing:
        raise ApiError("missing_modality", f"{where}: missing modality {missing}; "
                       f"{family.name} needs {list(family.modalities)}", where)


def to_response(r: ItemResult, arrival_s: float, now_s: float) -> ClassifyResponse:
    pred = (PredictionOut(label=r.label, confidence=r.confidence, label_name=r.label_name)
            if r.label is not None and r.confidence is not None else None)
    decision = None
    if r.decision is not None:
        d = r.decision
        decision = Decision(variant=d.variant, model=d.model, modalities=list(d.modalities),
                            gamma=d.gamma, expected_accuracy=d.expected_accuracy,
                            batch_size=d.batch_size, queue_ms=round(d.queue_ms, 3),
                            compute_ms=round(d.compute_ms, 3), deadline_met=d.deadline_met,
                            replica=d.replica, dispatch_ms=round(d.dispatch_ms, 3))
    return ClassifyResponse(request_id=r.item_id, status=r.status.value, prediction=pred,
                            decision=decision, latency_ms=round((now_s - arrival_s) * 1000, 3),
                            error=r.error, error_type=r.error_type)


class IngressService:
    def __init__(self, catalog: Catalog, http: HttpConfig, routes: dict[str, Any],
                 admission: Admission, metrics: IngressMetrics, coalesce_max_calls: int = 1,
                 coalesce_max_bytes: int | None = None,
                 liveness: FamilyLiveness | None = None) -> None:
        """`routes`: family -> the handle whose `classify_many(calls)` answers it;
        `liveness`: which families have a live replica (None: assume all do)."""
        self.catalog = catalog
        self.http = http
        self.json_limits = JsonLimits(http.max_json_depth, http.max_json_number_chars)
        self.routes = {f: Coalescer(h, coalesce_max_calls,
                                    metrics.coalesced.labels(f).observe, coalesce_max_bytes)
                       for f, h in routes.items()}
        self.admission = admission
        self.metrics = metrics
        self.liveness = liveness

    def budget_ms(self, slo: SLOSpec) -> float:
        """The SLO less the response margin (at most half the SLO is reserved)."""
        return slo.latency_ms - min(self.http.response_margin_ms, slo.latency_ms / 2)

    def deadline_s(self, arrival: Arrival, slo: SLOSpec) -> float:
        """Arrival + the SLO's budget (`budget_ms`)."""
        return arrival.time_s + self.budget_ms(slo) / 1000.0

    def admit(self, family: FamilyInfo, task: TaskInfo, deadline_s: float) -> None:
        """Refuse now a family without a live replica (503 unavailable) and what cannot be
        answered by its deadline (429 overloaded), both with Retry-After."""
        down = self.liveness.refusal(family.name) if self.liveness is not None else None
        if down is not None:
            self.metrics.refused.labels(family.name, "unavailable").inc()
            raise down
        if not self.http.deadline_admission:
            return
        refusal = self.admission.check(family, task, time.time(), deadline_s)
        if refusal is not None:
            self.metrics.refused.labels(family.name, "overloaded").inc()
            raise ApiError("overloaded", refusal.message, retry_after_s=refusal.retry_after_s)

    async def classify(self, body: bytes, arrival: Arrival) -> ClassifyResponse:
        return (await self.classify_family(body, arrival))[0]

    async def classify_family(self, body: bytes, arrival: Arrival
                              ) -> tuple[ClassifyResponse, FamilyInfo]:
        """The answer and the family that gave it."""
        req = parse_body(body, ClassifyRequest, self.http.max_body_bytes, self.json_limits)
        family, task = resolve(self.catalog, req.model, req.task, req.slo,
                               self.budget_ms(req.slo),
                               self.admission.fastest_answer_ms(req.model, time.time()))
        check_modalities(family, req.inputs, "inputs")
        deadline_s = self.deadline_s(arrival, req.slo)
        self.admit(family, task, deadline_s)
        results = await self._run(family, task, [req.inputs], req.slo, arrival.time_s,
                                  deadline_s, None)
        r = results[0]
        if r.status is ItemStatus.ERROR:
            raise ApiError(r.error_type or "internal_error",
                           f"request {r.item_id}: {r.error or 'internal error'}")
        if r.status is ItemStatus.OK:
            now = time.time()
            self.admission.answered(family.name, now - arrival.entry_s, now)
        return to_response(r, arrival.time_s, time.time()), family

    async def job(self, body: bytes, arrival: Arrival) -> JobResponse:
        req = parse_body(body, JobRequest, self.http.max_body_bytes, self.json_limits)
        limit = self.http.max_items_per_job
        if len(req.items) > limit:
            self.metrics.refused.labels(req.model, "job_too_large").inc()
            raise ApiError("job_too_large", f"a job holds at most {limit} items "
                           f"(http.max_items_per_job); this one has {len(req.items)}", "items")
        family, task = resolve(self.catalog, req.model, req.task, req.slo,
                               self.budget_ms(req.slo),
                               self.admission.fastest_answer_ms(req.model, time.time()))
        for i, item in enumerate(req.items):
            check_modalities(family, item, f"items[{i}]")
        deadline_s = self.deadline_s(arrival, req.slo)
        self.admit(family, task, deadline_s)
        room = self.admission.job_room(family.name, len(req.items))
        if room.admitted == 0:
            self.metrics.refused.labels(family.name, "overloaded").inc()
            raise ApiError("overloaded", f"{family.name} is overloaded: {room.reason}",
                           retry_after_s=1)
        job_id = uuid.uuid4().hex
        results = await self._run(family, task, req.items[:room.admitted], req.slo,
                                  arrival.time_s, deadline_s, job_id)
        if room.shed:
            self.metrics.shed_items.labels(family.name).inc(room.shed)
            results += [ItemResult(uuid.uuid4().hex, ItemStatus.SHED,
                                   error=f"shed at the ingress: {room.reason}")
                        for _ in range(room.shed)]
        now = time.time()
        return JobResponse(job_id=job_id,
                           results=[to_response(r, arrival.time_s, now) for r in results])

    async def _run(self, family: FamilyInfo, task: TaskInfo, inputs: list[dict[str, Any]],
                   slo: SLOSpec, arrival_s: float, deadline_s: float,
                   job_id: str | None) -> list[ItemResult]:
        ids = tuple(uuid.uuid4().hex for _ in inputs)
        call = ClassifyCall(family=family.name, task=task.task, inputs=tuple(inputs),
                            item_ids=ids, arrival_s=arrival_s, deadline_s=deadline_s,
                            utility=slo.utility, min_accuracy=slo.min_accuracy, job_id=job_id,
                            min_service_s=task.fastest().latency_ms / 1000.0)
        self.admission.begin(family.name, len(ids))
        ahead, sent_s = self.admission.inflight(family.name), time.time()
        latency_s: float | None = None  # only answers measure the drain, not failed calls
        try:
            results = await self._call(call)
            if any(r.status is not ItemStatus.ERROR for r in results):
                latency_s = time.time() - sent_s
            return results
        finally:
            self.admission.end(family.name, len(ids), ahead, latency_s)

    async def _call(self, call: ClassifyCall) -> list[ItemResult]:
        """Results of the family's route, waiting at most until the deadline plus the grace
        (a dead replica is retried inside that time; see deployments.dispatch); 503
        unavailable as soon as the family has no live replica left to answer it."""
        wait_s = min(call.deadline_s - time.time() + self.http.deadline_grace_s
                     + ROUTE_MARGIN_S, self.http.request_timeout_s)
        answer = self.routes[call.family].classify(call, wait_s)
        outcome = await (answer if self.liveness is None
                         else self.liveness.unless_down(call.family, answer))
        if outcome.problem is not None:
            p = outcome.problem
            raise ApiError(p.type, p.message, p.field)
        return list(outcome.results)
