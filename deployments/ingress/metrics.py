"""Prometheus series of one ingress replica (its own registry, no process globals)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from deployments.generation.pipeline import StageTiming
from deployments.ingress.clock import Arrival, StartSource
from policies.liveness import FamilyHealth

LATENCY_BUCKETS_S = (0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10)
COALESCED_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
PRE_INGRESS_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10)


class IngressMetrics:
    """HTTP counters, the time before the handler and the admission's refusals."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("adaptserve_http_requests", "HTTP requests by route and code",
                                ["route", "code"], registry=self.registry)
        self.latency = Histogram("adaptserve_http_latency_seconds",
                                 "HTTP latency by route, from the ingress handler's entry",
                                 ["route"], registry=self.registry, buckets=LATENCY_BUCKETS_S)
        self.pre_ingress = Histogram(
            "adaptserve_pre_ingress_seconds",
            "time from X-Request-Start to the ingress handler (client, proxy and its queue)",
            registry=self.registry, buckets=PRE_INGRESS_BUCKETS_S)
        self.start_ignored = Counter(
            "adaptserve_request_start_ignored", "X-Request-Start headers not believed, by why",
            ["reason"], registry=self.registry)
        self.refused = Counter(
            "adaptserve_admission_refused", "requests refused by the ingress's admission",
            ["family", "reason"], registry=self.registry)
        self.shed_items = Counter(
            "adaptserve_admission_shed_items", "job items shed at the ingress (queue share)",
            ["family"], registry=self.registry)
        self.coalesced = Histogram(
            "adaptserve_ingress_coalesced_calls",
            "requests per handle call from the ingress to a family (deployments/ingress/"
            "classify/coalesce.py)", ["family"], registry=self.registry, buckets=COALESCED_BUCKETS)
        self.family_up = Gauge(
            "adaptserve_family_up", "1 while the family has a live replica as this ingress sees "
            "it (up or suspect), 0 while starting or down (its requests get 503 unavailable)",
            ["family"], registry=self.registry)
        self.chat_stage = Histogram(
            "adaptserve_chat_stage_seconds",
            "a chat request's time to its first chunk by stage, as the ingress sees it: encode "
            "(the encoder calls, sent -> all answered), encoder_busy (of that, inside the "
            "slowest encoder replica), first_chunk (the LLM call -> its first chunk)",
            ["path", "stage"], registry=self.registry, buckets=PRE_INGRESS_BUCKETS_S)

    def observe_chat_stages(self, t: StageTiming) -> None:
        if t.encode_s is not None:
            self.chat_stage.labels(t.path, "encode").observe(t.encode_s)
        if t.encoder_busy_s is not None:
            self.chat_stage.labels(t.path, "encoder_busy").observe(t.encoder_busy_s)
        self.chat_stage.labels(t.path, "first_chunk").observe(t.first_chunk_s)

    def observe(self, route: str, code: int, seconds: float) -> None:
        self.requests.labels(route, str(code)).inc()
        self.latency.labels(route).observe(seconds)

    def observe_arrival(self, arrival: Arrival) -> None:
        if arrival.source.ignored:
            self.start_ignored.labels(arrival.source.value).inc()
        elif arrival.source is StartSource.HEADER:
            self.pre_ingress.observe(arrival.pre_ingress_s)

    def observe_health(self, family: str, health: FamilyHealth) -> None:
        self.family_up.labels(family).set(1.0 if health.healthy else 0.0)

    def text(self) -> str:
        return generate_latest(self.registry).decode()
