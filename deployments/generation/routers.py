"""Token-aware routing as Ray Serve request routers (ModServe section 4.3; the arithmetic is
policies/generation/token_routing.py).

Opting in: a deployment passes `request_router_config=image_token_router_config()` (encoders)
or `prompt_token_router_config()` (LLM) to `@serve.deployment` / `.options()`; every handle to it
then routes with the router (Serve builds one per handle process). Its replicas inherit
`ReportsPendingTokens` and wrap each call's work in `with self.holding_tokens(call):`, so
Serve's periodic `record_routing_stats()` poll carries their own pending-token count.

The cost of a call (`route_tokens_of`): the keyword argument `route_tokens=int`, else the
`route_tokens` int attribute (or key) of the routed method's first positional argument (the
stages' `ImageCall` / `GenerateCall`). It is in the router's units, computed by the caller with
policies.generation.token_routing (`image_route_tokens`: an image's tokens; `PromptCost.route_tokens`:
text + image tokens for decoder-only, text only for cross-attention); the replica counts the
same number, so the router's and the replica's counts agree. A call without it costs
`default_route_tokens` (0: it still counts as one request for the tie-break).

Life of a call in the router: `choose_replicas` ranks every replica (fewest pending tokens,
then fewest in-flight requests, then the replica this router chose least recently: ties rotate,
policies.generation.token_routing.TieOrder) and returns one replica per rank, so Serve
takes the best one that is not full; the best one gets a tentative entry, so calls chosen
while acceptances are still in flight (a fan-out over a slow link) spread (on one node Serve
got each acceptance back before the next choice: a 6-call burst spread 2/2/2 with or without
them). `on_request_routed`
(Serve calls it once the replica accepted) makes it a confirmed entry and hangs its release on
the result's done callback (success, error or cancellation; moved onto the router's loop), which
is exact per call; `on_request_completed` would only name (replica, internal_request_id), an id
all calls made while serving one request share (the images of a request). Replica reports
arriving with the controller's broadcasts are reconciled as policies.generation.token_ledger describes.

Prefill work, not streams: an LLM replica counts a call's prompt tokens only until its first
chunk (`holding_tokens(...).settle()`, deployments/generation/llm.py), so its reports carry the
prefill work queued there. The router cannot do the same for its own calls: Ray Serve's
`ReplicaResult` (ray/serve/_private/replica_result.py, both the actor and the gRPC kind) offers
`add_done_callback` only, which fires when the stream ends; the first chunk goes to the caller
iterating the response, and nothing hands it to the router. So the router holds its own calls'
tokens until the stream ends (its own decoding calls count, as before) and reads the other
routers' prefill work from the reports. The difference is the decode after the first token: a
few steps for this system's answers (1-5 tokens), so small here; with long answers the router
would over-count its own decoding calls, and E = max(0, R - L0) under-counts the other routers'
prefill by this router's decoding calls. The simulator (one router, exact counts) releases at
the first token, as the replicas do.
FIFOMixin: the next queued request takes the chosen replica (the choice does not depend on the
request), and sibling calls sharing an internal request id are never left unmatched.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ray.serve.config import RequestRouterConfig
from ray.serve.request_router import (
    FIFOMixin,
    PendingRequest,
    ReplicaID,
    ReplicaResult,
    RequestRouter,
    RunningReplica,
)

from policies.generation.token_ledger import LedgerSettings, TokenLedger
from policies.generation.token_routing import (
    PendingTokens,
    ReplicaReport,
    TieOrder,
    TokenHold,
    rank_replicas,
)

log = logging.getLogger(__name__)
ROUTE_TOKENS = "route_tokens"
ROUTER_KWARGS = ("seed", "tentative_ttl_s", "report_max_age_s", "default_route_tokens")


def route_tokens_of(args: Sequence[Any], kwargs: Mapping[str, Any]) -> int | None:
    """A call's cost: kwarg `route_tokens`, else its first argument's `route_tokens`."""
    value = kwargs.get(ROUTE_TOKENS)
    if value is None and args:
        first = args[0]
        value = (first.get(ROUTE_TOKENS) if isinstance(first, Mapping)
                 else getattr(first, ROUTE_TOKENS, None))
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


class TokenRouter(FIFOMixin, RequestRouter):
    """Least pending route tokens (see the module docstring); subclasses name the stage."""

    stage = "tokens"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ledger = TokenLedger()
        self._ties = TieOrder()
        self._serial = itertools.count()
        self._default_tokens = 0
        self._unpriced = 0
        # fallback release by (replica, internal request id) if a result takes no callback
        self._by_request: dict[tuple[str, str], list[tuple[str, int]]] = {}

    def initialize_state(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(ROUTER_KWARGS))
        if unknown:
            raise ValueError(f"unknown {type(self).__name__} kwargs {unknown}; "
                             f"valid: {list(ROUTER_KWARGS)}")
        self._ties = TieOrder(kwargs.get("seed"))
        self._ledger = TokenLedger(LedgerSettings(
            tentative_ttl_s=float(kwargs.get("tentative_ttl_s", 5.0)),
            report_max_age_s=float(kwargs.get("report_max_age_s", 30.0))))
        self._default_tokens = max(0, int(kwargs.get("default_route_tokens", 0)))

    async def choose_replicas(
        self, candidate_replicas: list[RunningReplica],
        pending_request: PendingRequest | None = None,
    ) -> list[list[RunningReplica]]:
        if pending_request is not None:
            # back off between rounds when every replica is full (LocalityMixin does this
            # for Serve's own router; without it the retry loop would spin)
            pending_request.routing_context.should_backoff = True
        if not candidate_replicas:
            return []
        now = time.monotonic()
        self._absorb_reports(candidate_replicas, now)
        by_id = {r.replica_id.unique_id: r for r in candidate_replicas}
        ranked = rank_replicas(self._ledger.loads(by_id, now), self._ties)
        if pending_request is not None:
            self._ties.chose(ranked[0])
            self._ledger.reserve(id(pending_request), ranked[0],
                                 self._tokens(pending_request), now)
        return [[by_id[r]] for r in ranked]

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID,
                          result: ReplicaResult) -> None:
        key = (self.stage, next(self._serial))
        replica = replica_id.unique_id
        self._ledger.confirm(key, replica, self._tokens(pending_request), time.monotonic(),
                             tentative_key=id(pending_request))
        loop = asyncio.get_running_loop()
        try:
            result.add_done_callback(
                lambda _: loop.call_soon_threadsafe(self._ledger.release, key))
        except Exception:  # a result type without callbacks: release on completion instead
            ids = (replica, pending_request.metadata.internal_request_id)
            self._by_request.setdefault(ids, []).append(key)

    def on_request_completed(self, replica_id: ReplicaID, internal_request_id: str) -> None:
        keys = self._by_request.get((replica_id.unique_id, internal_request_id))
        if keys:
            self._ledger.release(keys.pop(0))
            if not keys:
                del self._by_request[(replica_id.unique_id, internal_request_id)]

    def update_replicas(self, replicas: list[RunningReplica]) -> None:
        super().update_replicas(replicas)
        self._ledger.keep_only(r.replica_id.unique_id for r in replicas)
        self._ties.keep_only(r.replica_id.unique_id for r in replicas)
        self._absorb_reports(replicas, time.monotonic())

    def on_replica_actor_died(self, replica_id: ReplicaID) -> None:
        super().on_replica_actor_died(replica_id)
        self._ledger.keep_only(r.unique_id for r in self.curr_replicas)

    def _tokens(self, pending_request: PendingRequest) -> int:
        tokens = route_tokens_of(pending_request.args, pending_request.kwargs)
        if tokens is not None:
            return tokens
        self._unpriced += 1
        if self._unpriced == 1:
            log.warning("%s: a call to %s carries no %s (counted as %d); pass "
                        "route_tokens=int or an argument with a route_tokens attribute",
                        type(self).__name__, pending_request.metadata.call_method,
                        ROUTE_TOKENS, self._default_tokens)
        return self._default_tokens

    def _absorb_reports(self, replicas: Sequence[RunningReplica], now_s: float) -> None:
        for r in replicas:
            report = ReplicaReport.from_stats(r.routing_stats or {})
            if report is not None:
                self._ledger.report(r.replica_id.unique_id, report, now_s)


class ImageTokenRouter(TokenRouter):
    """Encoder replicas: the fewest pending image tokens (route_tokens = the image's tokens)."""

    stage = "image"


class PromptTokenRouter(TokenRouter):
    """LLM replicas: the fewest pending prompt tokens (route_tokens from
    policies.generation.token_routing.PromptCost: text + image for decoder-only, text for cross-attention)."""

    stage = "prompt"


class ReportsPendingTokens:
    """Mixin for a deployment class behind a TokenRouter: count each call's route tokens while
    it runs (`with self.holding_tokens(call_or_tokens) as hold:`; `hold.settle()` once the work
    the router balances is done, e.g. an LLM call's prefill, the call staying in flight); Serve
    polls `record_routing_stats` every `request_routing_stats_period_s` and hands the dict to
    the routers."""

    _pending_tokens: PendingTokens | None = None

    @property
    def pending_tokens(self) -> PendingTokens:
        if self._pending_tokens is None:
            self._pending_tokens = PendingTokens()
        return self._pending_tokens

    @contextmanager
    def holding_tokens(self, call: Any) -> Iterator[TokenHold]:
        """`call`: the route tokens (int) or the call object carrying `route_tokens`."""
        tokens = call if isinstance(call, int) else (route_tokens_of([call], {}) or 0)
        hold = TokenHold(self.pending_tokens, tokens)
        try:
            yield hold
        finally:
            hold.end()

    async def record_routing_stats(self) -> dict[str, Any]:
        return dict(self.pending_tokens.report().to_stats())


ROUTERS: dict[str, type[TokenRouter] | None] = {
    "pow2": None, "image_tokens": ImageTokenRouter, "prompt_tokens": PromptTokenRouter}


def token_router_config(kind: str, stats_period_s: float = 2.0, seed: int | None = None,
                        **kwargs: Any) -> RequestRouterConfig:
    """The `request_router_config` of a deployment: `kind` one of ROUTERS ("pow2": Serve's
    default power-of-two router, still polling record_routing_stats, for comparisons)."""
    if kind not in ROUTERS:
        raise ValueError(f"unknown router {kind!r}; valid: {list(ROUTERS)}")
    router = ROUTERS[kind]
    if router is None:
        return RequestRouterConfig(request_routing_stats_period_s=stats_period_s)
    router_kwargs = {"report_max_age_s": 5.0 * stats_period_s, **kwargs}
    if seed is not None:
        router_kwargs["seed"] = seed
    return RequestRouterConfig(request_router_class=router,
                               request_router_kwargs=router_kwargs,
                               request_routing_stats_period_s=stats_period_s)


def image_token_router_config(stats_period_s: float = 2.0, **kwargs: Any) -> RequestRouterConfig:
    return token_router_config("image_tokens", stats_period_s, **kwargs)


def prompt_token_router_config(stats_period_s: float = 2.0, **kwargs: Any) -> RequestRouterConfig:
    return token_router_config("prompt_tokens", stats_period_s, **kwargs)
