"""Token-aware routing (ModServe section 4.3): the arithmetic the Serve routers
(deployments/generation/routers.py) run, pure so the simulator can run it too.

Cost of a request, in tokens a replica still has to work through:
- an encoder replica's work is image tokens (`image_route_tokens`);
- an LLM replica's is the prompt: text + image tokens for a decoder-only model, text tokens
  only for a cross-attention model, whose prefill time barely grows with image tokens (ModServe
  Insight 7) (`PromptCost`).
Expected decode tokens count only with `decode_weight` > 0 (default 0, as ModServe): routing
protects TTFT, which waits on the prefill work queued ahead, and `max_tokens` is a cap, not an
expectation (our digit answers are 1-5 tokens under caps of hundreds), so counting it would
rank a long cap above a prompt of eight images.

A router picks the replica with the fewest pending tokens; ties go to fewer in-flight requests,
then to a seeded random draw (`rank_replicas`).

Reconciliation (`TokenLedger`): a router knows exactly what it sent and what has finished; a
replica's own count (every request from every router) arrives only every few seconds. When a
report R arrives, the router snapshots its own confirmed in-flight count L0 for that replica and
keeps E = max(0, R - L0) as the other routers' load. Its estimate is then
    local now + E          (until the next report, or E dropped once the report is too old).
So the estimate never falls below what this router knows it sent, equals max(local, R) at the
moment of a report, grows with R, and a completion frees its tokens at once (they were in L0,
so they never inflate E). Requests chosen but not yet accepted by a replica count as tentative
(they stop a burst, e.g. the images of one request, all landing on one replica before the first
acceptance comes back) and expire after `tentative_ttl_s` if never confirmed.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

# keys of a replica's routing stats (Serve's record_routing_stats dict)
PENDING_TOKENS_KEY = "pending_tokens"
INFLIGHT_KEY = "inflight_requests"
SEQ_KEY = "report_seq"


class Architecture(StrEnum):
    DECODER_ONLY = "decoder_only"
    CROSS_ATTENTION = "cross_attention"

    @classmethod
    def parse(cls, name: str | Architecture) -> Architecture:
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown architecture {name!r}; valid: "
                             f"{[a.value for a in cls]}") from None


@dataclass(frozen=True)
class RequestTokens:
    """What a request brings: its text prompt tokens, its images, and (optionally) the decode
    tokens the caller expects (an estimate, at most max_tokens)."""

    text_tokens: int = 0
    num_images: int = 0
    tokens_per_image: int = 0
    expected_decode_tokens: int = 0

    def __post_init__(self) -> None:
        if min(self.text_tokens, self.num_images, self.tokens_per_image,
               self.expected_decode_tokens) < 0:
            raise ValueError(f"token counts must be >= 0: {self}")

    @property
    def image_tokens(self) -> int:
        return self.num_images * self.tokens_per_image


def image_route_tokens(request: RequestTokens) -> int:
    """An encoder replica's cost of `request` (one image call: num_images=1)."""
    return request.image_tokens


@dataclass(frozen=True)
class PromptCost:
    """An LLM replica's cost of a request."""

    architecture: Architecture = Architecture.DECODER_ONLY
    decode_weight: float = 0.0  # per expected decode token, in prompt-token units

    def __post_init__(self) -> None:
        object.__setattr__(self, "architecture", Architecture.parse(self.architecture))
        if self.decode_weight < 0:
            raise ValueError(f"decode_weight must be >= 0, got {self.decode_weight}")

    @property
    def count_image_tokens(self) -> bool:
        return self.architecture is Architecture.DECODER_ONLY

    def route_tokens(self, request: RequestTokens) -> int:
        prompt = request.text_tokens + (request.image_tokens if self.count_image_tokens else 0)
        return prompt + round(self.decode_weight * request.expected_decode_tokens)


@dataclass(frozen=True, order=True)
class ReplicaLoad:
    """A replica's pending work as one router sees it (orders by tokens, then requests)."""

    pending_tokens: int = 0
    inflight_requests: int = 0

    def plus(self, other: ReplicaLoad) -> ReplicaLoad:
        return ReplicaLoad(self.pending_tokens + other.pending_tokens,
                           self.inflight_requests + other.inflight_requests)

    def excess_over(self, other: ReplicaLoad) -> ReplicaLoad:
        return ReplicaLoad(max(0, self.pending_tokens - other.pending_tokens),
                           max(0, self.inflight_requests - other.inflight_requests))


def rank_replicas(loads: Mapping[str, ReplicaLoad], rng: random.Random) -> list[str]:
    """Replica ids, best first: fewest pending tokens, then fewest in-flight requests, then a
    draw from `rng` (the same seed and loads give the same order)."""
    ids = sorted(loads)
    rng.shuffle(ids)
    return sorted(ids, key=lambda i: loads[i])  # stable: the shuffle breaks exact ties


def choose_replica(loads: Mapping[str, ReplicaLoad], rng: random.Random) -> str:
    if not loads:
        raise ValueError("no replica to choose from")
    return rank_replicas(loads, rng)[0]


@dataclass(frozen=True)
class ReplicaReport:
    """A replica's own count of what it holds (from every router), numbered by the replica so
    a router can tell a new report from one it has seen."""

    pending_tokens: int
    inflight_requests: int
    seq: int

    def to_stats(self) -> dict[str, int]:
        return {PENDING_TOKENS_KEY: self.pending_tokens, INFLIGHT_KEY: self.inflight_requests,
                SEQ_KEY: self.seq}

    @classmethod
    def from_stats(cls, stats: Mapping[str, object]) -> ReplicaReport | None:
        """None when `stats` holds no report (a replica that does not report, or has not yet)."""
        values = [stats.get(k) for k in (PENDING_TOKENS_KEY, INFLIGHT_KEY, SEQ_KEY)]
        ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
        if len(ints) != len(values):
            return None
        tokens, requests, seq = ints
        return cls(max(0, tokens), max(0, requests), seq)


class PendingTokens:
    """A replica's own tally of the route tokens it holds (single event loop, no locking);
    `report()` is what its `record_routing_stats` returns."""

    def __init__(self) -> None:
        self.tokens = 0
        self.requests = 0
        self._seq = 0

    def add(self, tokens: int) -> None:
        self.tokens += max(0, tokens)
        self.requests += 1

    def remove(self, tokens: int) -> None:
        self.tokens = max(0, self.tokens - max(0, tokens))
        self.requests = max(0, self.requests - 1)

    def report(self) -> ReplicaReport:
        self._seq += 1
        return ReplicaReport(self.tokens, self.requests, self._seq)


@dataclass(frozen=True)
class LedgerSettings:
    tentative_ttl_s: float = 5.0  # a choice never confirmed stops counting after this
    report_max_age_s: float = 30.0  # other routers' share from an older report is dropped

    def __post_init__(self) -> None:
        if self.tentative_ttl_s <= 0 or self.report_max_age_s <= 0:
            raise ValueError("tentative_ttl_s and report_max_age_s must be > 0")


@dataclass(frozen=True)
class _Entry:
    replica_id: str
    tokens: int
    confirmed: bool
    since_s: float


@dataclass(frozen=True)
class _Others:
    load: ReplicaLoad  # E = max(0, R - L0)
    seq: int
    at_s: float


class TokenLedger:
    """One router's view of its replicas' pending tokens (see the module docstring)."""

    def __init__(self, settings: LedgerSettings | None = None) -> None:
        self.settings = settings or LedgerSettings()
        self._entries: dict[Hashable, _Entry] = {}
        self._others: dict[str, _Others] = {}

    def reserve(self, key: Hashable, replica_id: str, tokens: int, now_s: float) -> None:
        """A tentative choice (replaces `key`'s earlier one): counts until confirmed."""
        self._expire(now_s)
        self._entries[key] = _Entry(replica_id, max(0, tokens), False, now_s)

    def confirm(self, key: Hashable, replica_id: str, tokens: int, now_s: float,
                tentative_key: Hashable | None = None) -> None:
        """The replica accepted the request: it counts until `release(key)`."""
        if tentative_key is not None:
            entry = self._entries.get(tentative_key)
            if entry is not None and not entry.confirmed:
                del self._entries[tentative_key]
        self._entries[key] = _Entry(replica_id, max(0, tokens), True, now_s)

    def release(self, key: Hashable) -> bool:
        """The request finished (any outcome); False when `key` was not counted."""
        return self._entries.pop(key, None) is not None

    def report(self, replica_id: str, report: ReplicaReport, now_s: float) -> bool:
        """Take a replica's report; False (ignored) when its seq was seen already."""
        seen = self._others.get(replica_id)
        if seen is not None and seen.seq == report.seq:
            return False
        mine = self.local(replica_id, now_s, confirmed_only=True)
        theirs = ReplicaLoad(report.pending_tokens, report.inflight_requests)
        self._others[replica_id] = _Others(theirs.excess_over(mine), report.seq, now_s)
        return True

    def keep_only(self, replica_ids: Iterable[str]) -> None:
        """Forget replicas not in `replica_ids` (gone, dead) and what was counted on them."""
        keep = set(replica_ids)
        self._others = {r: o for r, o in self._others.items() if r in keep}
        self._entries = {k: e for k, e in self._entries.items() if e.replica_id in keep}

    def local(self, replica_id: str, now_s: float, confirmed_only: bool = False) -> ReplicaLoad:
        tokens = requests = 0
        for e in self._entries.values():
            if e.replica_id == replica_id and (e.confirmed or (
                    not confirmed_only and now_s - e.since_s <= self.settings.tentative_ttl_s)):
                tokens += e.tokens
                requests += 1
        return ReplicaLoad(tokens, requests)

    def others(self, replica_id: str, now_s: float) -> ReplicaLoad:
        o = self._others.get(replica_id)
        if o is None or now_s - o.at_s > self.settings.report_max_age_s:
            return ReplicaLoad()
        return o.load

    def load(self, replica_id: str, now_s: float) -> ReplicaLoad:
        return self.local(replica_id, now_s).plus(self.others(replica_id, now_s))

    def loads(self, replica_ids: Iterable[str], now_s: float) -> dict[str, ReplicaLoad]:
        return {r: self.load(r, now_s) for r in replica_ids}

    def __len__(self) -> int:
        return len(self._entries)

    def _expire(self, now_s: float) -> None:
        ttl = self.settings.tentative_ttl_s
        stale = [k for k, e in self._entries.items()
                 if not e.confirmed and now_s - e.since_s > ttl]
        for k in stale:
            del self._entries[k]
