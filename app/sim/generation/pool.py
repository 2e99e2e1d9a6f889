"""A stage's replicas: their lifecycle (starting, ready, draining, gone), what each holds in route
tokens, and the router that picks one for the next piece of work.

- Routing `tokens`: the fewest pending route tokens, then the fewest in-flight calls, then the
  replica chosen least recently (ties rotate): `policies.generation.token_routing`'s order (`ReplicaLoad`,
  `TieOrder`, `choose_replica`), the code the live Serve routers run. The simulator has one
  router that sees every replica's tally exactly (`PendingTokens`, what a replica reports), so
  the `TokenLedger` reconciliation of many routers and stale reports is not modelled; for speed
  the choice runs over the replicas tied at the minimum only (the same choice as ranking all).
- `least_requests`: the fewest in-flight calls (a plain load balancer), ties rotating the same
  way; `round_robin` and `random` as their names say.
- `set_replicas(n, now_s)`: the autoscaling hook. Added replicas start at once and serve after
  the stage's `startup_s`; removed ones take no new work, finish what they hold, then go (the
  ones still starting are removed first, then the ready ones holding the fewest tokens).
  Accelerator-seconds count from a replica's start until it is gone.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from enum import IntEnum

from app.sim.generation.config import Routing, StageConfig
from app.sim.kernel import Kernel
from policies.generation.token_routing import PendingTokens, ReplicaLoad, TieOrder, choose_replica

READY_PRIORITY = 1  # after work finishing at the same instant, before arrivals


class Life(IntEnum):
    STARTING = 0
    READY = 1
    DRAINING = 2
    GONE = 3


class ReplicaPool:
    def __init__(self, name: str, cfg: StageConfig, kernel: Kernel, rng: random.Random,
                 on_ready: Callable[[float], None], has_work: Callable[[int], bool]) -> None:
        self.name = name
        self.cfg = cfg
        self.kernel = kernel
        self.rng = rng
        self.ties = TieOrder(rng.getrandbits(32))
        self.on_ready = on_ready  # a replica became ready: the stage routes what waited
        self.has_work = has_work  # whether replica k still holds work (a draining one stays)
        self.life: list[Life] = []
        self.pending: list[PendingTokens] = []
        self.added_s: list[float] = []
        self.gone_s: list[float | None] = []
        self.ready: list[int] = []  # READY replicas, in index order
        self.log: list[tuple[float, int, int]] = []  # (time, ready, held) at every change
        self._rr = 0
        for _ in range(cfg.replicas):
            self._add(0.0, ready=True)
        self._note(0.0)

    # ---- lifecycle ------------------------------------------------------------------------
    @property
    def held(self) -> int:
        """Replicas holding accelerators (starting, ready or draining)."""
        return sum(1 for s in self.life if s is not Life.GONE)

    @property
    def target(self) -> int:
        """Replicas that are or will be serving (starting or ready)."""
        return sum(1 for s in self.life if s in (Life.STARTING, Life.READY))

    def set_replicas(self, n: int, now_s: float) -> None:
        if n < 0:
            raise ValueError(f"{self.name}: replica count must be >= 0, got {n}")
        while self.target < n:
            self._add(now_s, ready=self.cfg.startup_s == 0)
        if self.target > n:
            for k in self._removal_order()[:self.target - n]:
                self._drain(k, now_s)
        self._note(now_s)

    def work_done(self, k: int, now_s: float) -> None:
        """Replica k finished some work: a draining one with nothing left goes."""
        if self.life[k] is Life.DRAINING and not self.has_work(k):
            self._retire(k, now_s)

    def accelerator_seconds(self, end_s: float) -> float:
        per = self.cfg.accelerators_per_replica
        return sum(per * max(0.0, (g if g is not None else end_s) - a)
                   for a, g in zip(self.added_s, self.gone_s, strict=True))

    def _add(self, now_s: float, ready: bool) -> None:
        k = len(self.life)
        self.life.append(Life.READY if ready else Life.STARTING)
        self.pending.append(PendingTokens())
        self.added_s.append(now_s)
        self.gone_s.append(None)
        if ready:
            self.ready.append(k)
            if now_s > 0:
                self.kernel.at(now_s, READY_PRIORITY, self._became_ready_now)
        else:
            self.kernel.at(now_s + self.cfg.startup_s, READY_PRIORITY, self._became_ready, k)

    def _became_ready(self, now_s: float, k: int) -> None:
        if self.life[k] is not Life.STARTING:
            return  # removed while starting
        self.life[k] = Life.READY
        self.ready.append(k)
        self.ready.sort()
        self._note(now_s)
        self.on_ready(now_s)

    def _became_ready_now(self, now_s: float, _: int) -> None:
        self.on_ready(now_s)

    def _removal_order(self) -> list[int]:
        starting = [k for k, s in enumerate(self.life) if s is Life.STARTING]
        ready = sorted(self.ready, key=lambda k: (self.pending[k].tokens, -k))
        return starting[::-1] + ready

    def _drain(self, k: int, now_s: float) -> None:
        if self.life[k] is Life.STARTING:
            self._retire(k, now_s)
            return
        self.life[k] = Life.DRAINING
        self.ready.remove(k)
        self.work_done(k, now_s)

    def _retire(self, k: int, now_s: float) -> None:
        if self.life[k] is Life.READY:
            self.ready.remove(k)
        self.life[k] = Life.GONE
        self.gone_s[k] = now_s
        self._note(now_s)

    def _note(self, now_s: float) -> None:
        entry = (now_s, len(self.ready), self.held)
        if not self.log or self.log[-1][1:] != entry[1:]:
            self.log.append(entry)

    # ---- routing --------------------------------------------------------------------------
    def route(self) -> int | None:
        """The ready replica for the next call (None: no replica is ready)."""
        ready = self.ready
        if not ready:
            return None
        mode = self.cfg.routing
        if mode is Routing.RANDOM:
            return ready[self.rng.randrange(len(ready))]
        if mode is Routing.ROUND_ROBIN:
            self._rr += 1
            return ready[(self._rr - 1) % len(ready)]
        pending = self.pending
        if mode is Routing.TOKENS:
            keys = [(pending[k].tokens, pending[k].requests) for k in ready]
        else:
            keys = [(0, pending[k].requests) for k in ready]
        best = min(keys)
        tied = [k for k, key in zip(ready, keys, strict=True) if key == best]
        if len(tied) == 1:
            self.ties.chose(str(tied[0]))
            return tied[0]
        return int(choose_replica({str(k): ReplicaLoad(*best) for k in tied}, self.ties))

    def hold(self, k: int, tokens: int) -> None:
        self.pending[k].add(tokens)

    def settle(self, k: int, tokens: int) -> None:
        """Replica k's call has done the work the router balances: its tokens stop counting, the
        call stays in flight (an LLM call at its first token)."""
        self.pending[k].settle(tokens)

    def release(self, k: int, tokens: int) -> None:
        """Replica k's call ended, still holding `tokens` (0 once settled)."""
        self.pending[k].remove(tokens)
