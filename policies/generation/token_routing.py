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

Pending work, not pending calls: a replica counts a call's tokens until the work the router
balances is done (`TokenHold`): an encoder call until its images are encoded (the call's end),
an LLM call until its first token, i.e. until its prefill is done; the call then stays in
flight (it still counts as one request for the tie-break) while it decodes. Counting a prompt
until its last token would make the count mostly measure the sequences decoding, which barely
slow a prefill, and hide the prefill queued ahead (docs/sim_generation.md).

A router picks the replica with the fewest pending tokens; ties go to fewer in-flight requests,
then to the replica this router gave work least recently (`TieOrder`: tied replicas are taken
in rotating, round-robin order, never-chosen ones first in a seeded order), so equally loaded
replicas share the work as round robin would instead of by chance.

Several routers: each reconciles its own count with the replicas' reports (`TokenLedger`,
policies/generation/token_ledger.py).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable, Mapping
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


class TieOrder:
    """The order among replicas tied on load: the one this router gave work least recently
    first; replicas never given work first of all, in an order drawn from `seed` (two routers
    with different seeds do not send their first calls to the same replica). With every replica
    tied, successive choices cycle through them as round robin does."""

    def __init__(self, seed: int | None = None) -> None:
        self._salt = random.Random(seed).getrandbits(32)
        self._last: dict[str, int] = {}  # replica -> serial of the last choice of it
        self._serial = 0

    def key(self, replica_id: str) -> tuple[int, int]:
        """Smaller goes first: (serial of its last choice, -1 if never), then the seeded order."""
        return (self._last.get(replica_id, -1),
                zlib.crc32(f"{self._salt}:{replica_id}".encode()))

    def chose(self, replica_id: str) -> None:
        self._serial += 1
        self._last[replica_id] = self._serial

    def keep_only(self, replica_ids: Iterable[str]) -> None:
        """Forget replicas not in `replica_ids` (gone)."""
        keep = set(replica_ids)
        self._last = {r: s for r, s in self._last.items() if r in keep}


def rank_replicas(loads: Mapping[str, ReplicaLoad], ties: TieOrder) -> list[str]:
    """Replica ids, best first: fewest pending tokens, then fewest in-flight requests, then
    `ties`' rotating order (the same choices and loads give the same order)."""
    return sorted(loads, key=lambda i: (loads[i], ties.key(i)))


def choose_replica(loads: Mapping[str, ReplicaLoad], ties: TieOrder) -> str:
    """The best replica of `loads` (rank_replicas), noted in `ties` as chosen."""
    if not loads:
        raise ValueError("no replica to choose from")
    best = min(loads, key=lambda i: (loads[i], ties.key(i)))
    ties.chose(best)
    return best


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

    def settle(self, tokens: int) -> None:
        """A call's work for the router is done (an LLM call's prefill): its tokens stop
        counting, the call stays in flight."""
        self.tokens = max(0, self.tokens - max(0, tokens))

    def remove(self, tokens: int) -> None:
        """A call ended, still holding `tokens` (0 once settled)."""
        self.tokens = max(0, self.tokens - max(0, tokens))
        self.requests = max(0, self.requests - 1)

    def report(self) -> ReplicaReport:
        self._seq += 1
        return ReplicaReport(self.tokens, self.requests, self._seq)


class TokenHold:
    """One call's hold on a replica's `PendingTokens`: its tokens count from the start until
    `settle()` (its work for the router is done: an LLM call at its first token) or `end()`,
    and the call counts as in flight until `end()`. Each step takes effect once."""

    def __init__(self, pending: PendingTokens, tokens: int) -> None:
        self.pending = pending
        self.tokens = max(0, tokens)
        self.settled = self.ended = False
        pending.add(self.tokens)

    def settle(self) -> None:
        if not self.settled and not self.ended:
            self.settled = True
            self.pending.settle(self.tokens)

    def end(self) -> None:
        if not self.ended:
            self.ended = True
            self.pending.remove(0 if self.settled else self.tokens)
