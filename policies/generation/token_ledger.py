"""One router's view of its replicas' pending tokens (token_routing.py says what is counted and
how a replica is chosen).

Reconciliation (`TokenLedger`): a router knows exactly what it sent and what has finished; a
replica's own count (every request from every router) arrives only every few seconds. When a
report R arrives, the router snapshots its own confirmed in-flight count L0 for that replica and
keeps E = max(0, R - L0) as the other routers' load. Its estimate is then
    local now + E          (until the next report, or E dropped once the report is too old).
So the estimate never falls below what this router knows it sent, equals max(local, R) at the
moment of a report, grows with R, and a completion frees its tokens at once (they were in L0,
so they never inflate E). Requests chosen but not yet accepted by a replica count as tentative
(they stop a burst, e.g. the images of one request, all landing on one replica before the first
acceptance comes back) and expire after `tentative_ttl_s` if never confirmed. (A Serve router
learns only when a streaming call ends, not its first chunk: the live prompt router holds its
own calls' tokens until their end while the replicas report prefill work only;
deployments/generation/routers.py says what that changes.)
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from policies.generation.token_routing import ReplicaLoad, ReplicaReport


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
