"""OTAS token adaptation as a replica scheduler (and the fixed-gamma baseline).

The scheduler keeps OTAS's batch queue across calls: items it has not seen join it with
Algorithm 1 (per task, so a batch holds one task; thresholds from the plan), items that left
the replica's queue leave it. Each call hands the batch queue and the replica's arrival rate
to `OtasPolicy` (rate table / Algorithm 2 DP, switch rule) or `FixedGammaPolicy`, turns its
evictions into drops and its chosen batch and gamma into a `BatchPlan` on the variant of that
(task, gamma). Variants of a token-adaptive profile carry `Variant.gamma`, and `Variant.model`
names the task head (a single-model profile serves every task).
"""

from __future__ import annotations

from policies.profile import Profile
from policies.schedulers.base import (
    BatchPlan,
    Drop,
    DropReason,
    PendingItem,
    Scheduler,
    SchedulerDecision,
)
from policies.schedulers.common import expect_plan
from policies.schedulers.params import FixedGammaParams, OtasParams
from policies.schedulers.plan_types import OtasPlan, Plan
from policies.schedulers.plans import build_otas_plan
from policies.tokens.api import (
    BatchingParams,
    BatchQueue,
    FixedGammaPolicy,
    OtasDecision,
    OtasPolicy,
    OtasSnapshot,
    TokenProfile,
    add_query,
)
from policies.types import SLO, Request, Variant

_MIN_SLO_S = 1e-9
_WAIT_EPS_S = 1e-4


class OtasScheduler(Scheduler):
    """OTAS (`OtasParams`) or the fixed-gamma baseline (`FixedGammaParams`).

    Drops: OTAS evicts queries its batch can no longer finish in time even at the fastest gamma;
    an evicted item that could still make it alone is reported as SHED, else as
    DEADLINE_EXCEEDED. Items of a task the profile lacks are SHED. When the plan runs nothing,
    `wait_s` is the time until the next item becomes infeasible (so it is then evicted).
    """

    def __init__(self, profile: Profile, otas: OtasPlan,
                 params: OtasParams | FixedGammaParams) -> None:
        self.name = params.scheduler
        self.profile = profile
        max_batch = (params.max_batch_size if params.max_batch_size is not None
                     else otas.max_batch_size)
        self.tokens = TokenProfile.from_profile(profile, params.percentile or otas.percentile,
                                                max_batch)
        b = otas.batching
        self.batching = BatchingParams(b.max_wait_s, min(b.max_batch_size,
                                                         self.tokens.max_batch_size),
                                       b.max_deadline_gap_s, b.max_utility_gap)
        self.max_batch_size = self.batching.max_batch_size
        self.policy: OtasPolicy | FixedGammaPolicy
        self._gamma_set: tuple[int, ...] = tuple(range(len(self.tokens.gammas)))
        if isinstance(params, FixedGammaParams):
            gamma = params.gamma if params.gamma is not None else default_gamma(profile)
            self.policy = FixedGammaPolicy(self.tokens, gamma)
            self._gamma_set = (self.tokens.gamma_index(gamma),)
        else:
            self.policy = OtasPolicy(self.tokens, otas.rate_table,
                                     params.allocator or otas.allocator, otas.switch,
                                     otas.kappa if params.kappa is None else params.kappa)
        self._params = params
        self.plan_id = otas.plan_id
        self._variants: dict[tuple[str, int], tuple[Variant, float]] = {}
        for vp in profile.variants:
            task = vp.variant.model or vp.variant.name
            self._variants[(task, vp.variant.gamma)] = (vp.variant, vp.accuracy)
        self._queues: dict[str, BatchQueue] = {}
        self._next_batch_id = 0
        self._request_of: dict[str, int] = {}
        self._item_of: dict[int, PendingItem] = {}
        self._next_request = 0
        self._service_start_s: float | None = None
        # The policy's answer in the latest `decide` (None when it had no batch to decide on):
        # its method and DP instance, which the OTAS experiment tallies.
        self.last_decision: OtasDecision | None = None

    # --- queue bookkeeping ----------------------------------------------------------------

    def _sync(self, pending: tuple[PendingItem, ...]) -> list[PendingItem]:
        """Forget items that left; add new ones (arrival order). Returns unknown-task items."""
        present = {p.item_id for p in pending}
        gone = [rid for iid, rid in self._request_of.items() if iid not in present]
        if gone:
            gone_set = set(gone)
            for task, q in list(self._queues.items()):
                self._queues[task] = q.without_requests(gone_set)
            for rid in gone:
                del self._request_of[self._item_of.pop(rid).item_id]
        unknown: list[PendingItem] = []
        fresh = sorted((p for p in pending if p.item_id not in self._request_of),
                       key=lambda p: (p.arrival_s, p.deadline_s))
        for item in fresh:
            try:
                task = self.tokens.task_key(item.task)
            except ValueError:
                unknown.append(item)
                continue
            rid = self._next_request
            self._next_request += 1
            self._request_of[item.item_id] = rid
            self._item_of[rid] = item
            slo = SLO(max(item.deadline_s - item.arrival_s, _MIN_SLO_S), utility=item.utility)
            request = Request(rid, item.arrival_s, slo, task)
            queue = self._queues.get(task, BatchQueue())
            queue = add_query(BatchQueue(queue.batches, self._next_batch_id), request,
                              self.batching)
            self._next_batch_id = queue.next_batch_id
            self._queues[task] = queue
        return unknown

    def _forget(self, request_ids: set[int]) -> None:
        for task, q in list(self._queues.items()):
            self._queues[task] = q.without_requests(request_ids)
        for rid in request_ids:
            del self._request_of[self._item_of.pop(rid).item_id]

    def _fastest_alone_s(self, task: str) -> float:
        return min(self.tokens.batch_latency_s({task: 1}, g) for g in self._gamma_set)

    # --- the decision ---------------------------------------------------------------------

    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               load_qps: float) -> SchedulerDecision:
        if self._service_start_s is None:
            self._service_start_s = now_s
        self.last_decision = None
        drops = [Drop(p.item_id, DropReason.SHED) for p in self._sync(pending)]
        batches = tuple(b for q in self._queues.values() for b in q.batches)
        if not batches:
            return SchedulerDecision(drops=tuple(drops))
        decision: OtasDecision = self.policy.decide(
            OtasSnapshot(batches, load_qps, self._service_start_s), now_s)
        self.last_decision = decision
        evicted = set(decision.evicted_request_ids)
        for rid in sorted(evicted):
            item = self._item_of[rid]
            alone = now_s + self._fastest_alone_s(self.tokens.task_key(item.task))
            reason = DropReason.SHED if alone < item.deadline_s else DropReason.DEADLINE_EXCEEDED
            drops.append(Drop(item.item_id, reason))
        self._forget(evicted)
        run = self._run(decision)
        wait_s = None if run is not None else self._wait_s(now_s)
        return SchedulerDecision(drops=tuple(drops), run=run, wait_s=wait_s)

    def _run(self, decision: OtasDecision) -> BatchPlan | None:
        if decision.run_batch_id is None or decision.gamma is None:
            return None
        rids = decision.run_request_ids
        task = self.tokens.task_key(self._item_of[rids[0]].task)
        variant, accuracy = self._variant(task, decision.gamma)
        items = sorted((self._item_of[r] for r in rids), key=lambda p: p.deadline_s)
        self._forget(set(rids))
        return BatchPlan(variant, tuple(p.item_id for p in items), accuracy)

    def _variant(self, task: str, gamma: int) -> tuple[Variant, float]:
        found = self._variants.get((task, gamma))
        if found is not None:
            return found
        # Single-model profile keyed by variant name: any variant with this gamma.
        for (_, g), value in self._variants.items():
            if g == gamma:
                return value
        raise ValueError(f"no variant for task {task!r} gamma {gamma}")

    def _wait_s(self, now_s: float) -> float | None:
        deadlines = [item.deadline_s - self._fastest_alone_s(self.tokens.task_key(item.task))
                     for item in self._item_of.values()]
        if not deadlines:
            return None
        return max(min(deadlines) - now_s, 0.0) + _WAIT_EPS_S

    def update_plan(self, plan: Plan) -> None:
        """A new `OtasPlan`: rate table, switch rule, kappa and allocator (OTAS only, and the
        scheduler's own `allocator` / `kappa` params still win; the batching thresholds and the
        fixed-gamma baseline keep theirs)."""
        otas = expect_plan(self, plan, OtasPlan)
        if isinstance(self.policy, OtasPolicy) and isinstance(self._params, OtasParams):
            p = self._params
            self.policy = OtasPolicy(self.tokens, otas.rate_table, p.allocator or otas.allocator,
                                     otas.switch, otas.kappa if p.kappa is None else p.kappa)
        self.plan_id = otas.plan_id


def default_gamma(profile: Profile) -> int:
    """0 when profiled, else the largest profiled gamma."""
    gammas = sorted({v.variant.gamma for v in profile.variants})
    return 0 if 0 in gammas else gammas[-1]


def make_otas(profile: Profile, given: Plan | None,
              params: OtasParams | FixedGammaParams) -> Scheduler:
    """The plan, or one built now from the profile (cheap); `fixed_gamma` uses only its
    batching thresholds."""
    if given is None:
        given = build_otas_plan(profile, percentile=params.percentile or "p95",
                                max_batch_size=params.max_batch_size)
    return OtasScheduler(profile, expect_plan(params.scheduler, given, OtasPlan), params)
