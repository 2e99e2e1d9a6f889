"""The HTTP ingress (FastAPI inside a Serve deployment).

Routes: POST /v1/classify, POST /v1/jobs, GET /v1/models, GET /v1/status, GET /healthz,
GET /metrics. The classify/jobs handlers take the request's arrival (`clock.py`: the
X-Request-Start header when believed) before anything else. Every request gets exactly one JSON
answer (metrics: Prometheus text); errors are `ErrorResponse` bodies (see
deployments.ingress.errors for the table). The FastAPI app is built per replica by
`__serve_build_asgi_app__`, so routes close over the replica's own state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from ray import serve
from starlette.exceptions import HTTPException as StarletteHTTPException

from deployments.autoscaling.view import LedgerView, prometheus_text, status_json
from deployments.config import RequestPathConfig, grpc_message_bytes
from deployments.handles import await_response, warm_handles, with_transport
from deployments.ingress.chat.answers import models_page
from deployments.ingress.chat.routes import add_chat_route, model_entries
from deployments.ingress.chat.service import ChatService, chat_service
from deployments.ingress.classify.admission import Admission, FamilyCapacity
from deployments.ingress.classify.catalog import Catalog
from deployments.ingress.classify.service import IngressService
from deployments.ingress.clock import HEADER, Arrival, arrival_from
from deployments.ingress.config import HttpConfig
from deployments.ingress.errors import ApiError, error_response
from deployments.ingress.health import FamilyLiveness, WatchedHandle
from deployments.ingress.metrics import IngressMetrics
from deployments.ingress.openapi import declare_api
from deployments.ingress.proxy.auth import ApiKeys, load_keys
from deployments.ingress.proxy.edge import AuthGate, BodyRefused, edge_from_env, read_body
from deployments.ingress.proxy.front_door import DEGRADES_HEADER

log = logging.getLogger(__name__)
CONTROL_TIMEOUT_S = 3.0
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


async def guarded(route: str, metrics: IngressMetrics,
                  handler: Callable[[], Awaitable[Any]]) -> Response:
    """Run a route: ApiError -> its ErrorResponse, anything else -> 500 JSON; count it."""
    start = time.perf_counter()
    try:
        result = await handler()
        resp = result if isinstance(result, Response) else JSONResponse(_dump(result))
    except ApiError as exc:
        resp = exc.response()
    except Exception as exc:
        log.exception("unexpected error on %s", route)
        resp = error_response(500, "internal_error", f"{type(exc).__name__}: {exc}")
    metrics.observe(route, resp.status_code, time.perf_counter() - start)
    return resp


def _dump(result: Any) -> Any:
    return result.model_dump() if hasattr(result, "model_dump") else result


async def _control(call: Any) -> Any:
    try:
        return await await_response(call, CONTROL_TIMEOUT_S)
    except Exception as exc:
        raise ApiError("controller_unavailable",
                       f"controller did not answer: {type(exc).__name__}") from None



def add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StarletteHTTPException)
    async def _http_exc(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        type_ = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        resp = error_response(exc.status_code, type_, str(exc.detail))
        resp.headers.update(exc.headers or {})  # 405: `Allow`
        return resp

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(422, "invalid_request", str(exc.errors()))


def build_http_app(service: IngressService, controller: Any, metrics: IngressMetrics,
                   health: Callable[[], Awaitable[Any]], keys: ApiKeys | None = None,
                   chat: ChatService | None = None,
                   autoscaling: LedgerView | None = None) -> FastAPI:
    """`keys`: API keys checked here too (proxy/auth.py; the proxy's front door checks first);
    `chat`: the VLM's service (/v1/chat/completions), or None; `autoscaling`: where the
    autoscaling decisions are read (deployments/autoscaling/view.py), or None."""
    app = FastAPI(title="adaptserve", docs_url="/docs", openapi_url="/openapi.json")
    http = service.http
    if keys is not None and not keys.open:
        app.add_middleware(AuthGate, keys=keys)
    declare_api(app, service.catalog, http.max_items_per_job, keys)

    add_error_handlers(app)

    @app.post("/v1/classify")
    async def classify(request: Request) -> Response:
        arrival = _arrival(request, service.http, metrics)
        return await guarded("classify", metrics,
                             lambda: _body(request, arrival, partial(_classified, service), http))

    @app.post("/v1/jobs")
    async def jobs(request: Request) -> Response:
        arrival = _arrival(request, service.http, metrics)
        return await guarded("jobs", metrics,
                             lambda: _body(request, arrival, service.job, http))

    if chat is not None:
        add_chat_route(app, chat, http, metrics,
                       lambda request: _arrival(request, http, metrics))

    models_json = {**service.catalog.to_json(), **models_page(model_entries(service.catalog.names(), chat))}

    @app.get("/v1/models")
    async def models() -> Response:
        return await guarded("models", metrics, _const(models_json))

    @app.get("/v1/status")
    async def status() -> Response:
        return await guarded("status", metrics,
                             lambda: status_of(controller, service.liveness, autoscaling))

    @app.get("/healthz")
    async def healthz() -> Response:
        return await guarded("healthz", metrics, health)

    @app.get("/metrics")
    async def prometheus() -> Response:
        async def text() -> Response:
            try:
                ctl = await _control(controller.metrics_text.remote())
            except ApiError as exc:
                ctl = f"# controller unavailable: {exc.message}\n"
            scaling = prometheus_text(await autoscaling.snapshot()) if autoscaling else ""
            return PlainTextResponse(metrics.text() + ctl + scaling, media_type=PROMETHEUS_TEXT)
        return await guarded("metrics", metrics, text)

    return app


async def health_of(service: IngressService, ready: set[str], probes: dict[str, Any]) -> Any:
    """503 `not_ready` until every deployment behind the ingress has answered a ping; then 200
    while some family has a live replica (`degraded`, naming the `down` ones, when not all do)
    and 503 `unavailable` when none has (docs/serving.md, Health)."""
    waiting = sorted(set(probes) - ready)
    if waiting:
        raise ApiError("not_ready", f"deployments starting: {waiting}", status=503)
    body: dict[str, Any] = {"status": "ok", "models": service.catalog.names()}
    live = service.liveness
    if live is None:
        return body
    down = live.down()
    if down and len(down) == len(live.states):
        raise ApiError("unavailable", f"no model family has a live replica: {down}",
                       retry_after_s=live.settings.retry_after_s)
    return {**body, "status": "degraded" if down else "ok", "down": down,
            "families": live.to_json()}


async def status_of(controller: Any, liveness: FamilyLiveness | None,
                    autoscaling: LedgerView | None = None) -> Any:
    """The controller's status, each family's entry marked with what this ingress knows:
    `healthy`, `live_replicas` and `health` (state, for_s, reason); `autoscaling`: the last
    decision per autoscaled deployment and the recent changes (null: none autoscales)."""
    status = await _control(controller.status.remote())
    if autoscaling is not None and isinstance(status, dict):
        status["autoscaling"] = status_json(await autoscaling.snapshot())
    if liveness is None or not isinstance(status, dict):
        return status
    health = liveness.to_json()
    for family, entry in (status.get("deployments") or {}).items():
        h = health.get(family)
        if isinstance(entry, dict) and h is not None:
            entry.update(healthy=h["healthy"], live_replicas=h["live_replicas"],
                         health={k: h[k] for k in ("state", "for_s", "reason")})
    return status


def _app_name() -> str | None:
    try:
        return serve.get_replica_context().app_name
    except Exception:  # outside Serve (unit use)
        return None


def _const(value: Any) -> Callable[[], Awaitable[Any]]:
    async def get() -> Any:
        return value
    return get


def _arrival(request: Request, http: HttpConfig, metrics: IngressMetrics) -> Arrival:
    """The request's clock start, taken first thing in the handler."""
    arrival = arrival_from(request.headers.get(HEADER), time.time(),
                           http.request_start_max_skew_s, http.request_start_max_age_s)
    metrics.observe_arrival(arrival)
    return arrival


async def _classified(service: IngressService, body: bytes, arrival: Arrival) -> Response:
    """The classify answer, saying whether the family's policy degrades: the front door judges
    the family's lateness by it (proxy/front_door.py) and takes the header off."""
    answer, family = await service.classify_family(body, arrival)
    return JSONResponse(answer.model_dump(),
                        headers={DEGRADES_HEADER: "1" if family.degrades else "0"})


async def _body(request: Request, arrival: Arrival,
                handle: Callable[[bytes, Arrival], Awaitable[Any]], http: HttpConfig) -> Any:
    """The body read while it streams, bounded and timed as the front door reads it (proxy/edge.py):
    the same answers when a request reaches the ingress without the proxy's middleware."""
    try:
        body = await read_body(request.receive, request.scope, http.max_body_bytes,
                               http.body_read_timeout_s)
    except BodyRefused as exc:
        raise ApiError(exc.type, exc.message, status=exc.status) from None
    if body is None:
        raise ApiError("incomplete_body", "the client went away before its body was in")
    return await handle(body, arrival)


@serve.deployment(max_ongoing_requests=256)
@serve.ingress()
class Ingress:
    """Imports no torch (tests/unit/test_ingress_admission.py): the ingress process only parses,
    admits and forwards."""

    # async: lets the replica start warming its handles in the background
    async def __init__(self, catalog: Catalog, http: dict[str, Any],  # type: ignore[misc]
                       request_path: dict[str, Any], routes: dict[str, Any],
                       probes: dict[str, Any], controller: Any,
                       capacity: dict[str, FamilyCapacity],
                       families: dict[str, Any] | None = None, chat: Any = None) -> None:
        """`routes`: family -> the deployment whose `classify` answers it (its classifier, or
        preprocess); `probes`: every deployment behind the ingress by name (warmed, and /healthz
        waits for them); `capacity`: each family's classifier replicas and queue bound
        (admission); `request_path`: how calls travel (RequestPathConfig); `families`: family ->
        its classifier deployment, probed for live replicas (health.py; default: `routes`);
        `chat`: the generation stages (app/chat_graph.py ChatGraph) behind
        /v1/chat/completions, or None."""
        self.http = HttpConfig.model_validate(http)
        self.keys = load_keys(edge_from_env(os.environ).auth, os.environ)  # as the proxy's
        log.log(logging.WARNING if self.keys.open else logging.INFO, "ingress: %s",
                self.keys.describe())
        path = RequestPathConfig.model_validate(request_path)
        transport = path.handle_transport
        self.metrics = IngressMetrics()
        admission = Admission(catalog, capacity, self.http.num_replicas,
                              self.http.max_job_queue_share)
        self.liveness = FamilyLiveness(catalog.names(), observe=self.metrics.observe_health)
        self._watch = self.liveness.start(families or routes)
        routes = {f: WatchedHandle(with_transport(h, transport), f, self.liveness)
                  for f, h in routes.items()}
        # merged calls stay under half the gRPC message limit (a job alone fits: app/config.py)
        max_bytes = (grpc_message_bytes(path.replica_env) // 2 if transport == "grpc" else None)
        self.service = IngressService(catalog, self.http, routes, admission, self.metrics,
                                      path.coalesce_max_calls, max_bytes, self.liveness)
        self.controller = controller
        self.chat = None if chat is None else chat_service(chat, self.http,
                                                           self.metrics.observe_chat_stages)
        self.probes = {n: with_transport(h, transport) for n, h in probes.items()}
        self.ready: set[str] = set()
        self.autoscaling = LedgerView(_app_name())
        self._warm = asyncio.get_running_loop().create_task(
            warm_handles(self.probes, self.ready, timeout_s=600.0))

    def __serve_build_asgi_app__(self) -> FastAPI:
        return build_http_app(self.service, self.controller, self.metrics,
                              lambda: health_of(self.service, self.ready, self.probes), self.keys,
                              self.chat, self.autoscaling)
