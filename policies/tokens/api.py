"""OTAS token adaptation: the public entry point.

`OtasPolicy.decide(snapshot, now_s)` is called by a worker whenever its accelerator is idle. It
evicts queries that can no longer meet their deadline even at the fastest gamma (outcome type 4),
sorts the batches by deadline, allocates a gamma per batch with Algorithm 3 (short queue or
initial stage, the switch rule of section III-D) or with a dynamic program ("alg2" = the paper's
Algorithm 2, "exact" = the exact allocator), and returns the first batch the plan executes.
`FixedGammaPolicy` is the fixed-token baseline (ToMe / VPT / vanilla) on the same queue.
Policies are deterministic, so they take no random generator.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from policies.tokens.batching import BatchingParams, BatchQueue, QueuedBatch, add_query
from policies.tokens.dp import (
    Allocation,
    AllocationProblem,
    allocate_alg2,
    allocate_exact,
    allocate_exhaustive,
    evaluate,
)
from policies.tokens.profile import TokenProfile
from policies.tokens.rate import RateRow, RateTable, SwitchRule, allocate_rate_table
from policies.tokens.utility import QueryResult, QueryType, UtilityTally, classify, tally

__all__ = [
    "ALLOCATORS", "Allocation", "AllocationMethod", "AllocationProblem", "BatchQueue",
    "BatchingParams", "FixedGammaPolicy", "OtasDecision", "OtasPolicy", "OtasSnapshot",
    "QueryResult", "QueryType", "QueuedBatch", "RateRow", "RateTable", "SwitchRule",
    "TokenProfile", "UtilityTally", "add_query", "allocate_alg2", "allocate_exact",
    "allocate_exhaustive", "allocate_rate_table", "build_problem", "classify", "evaluate",
    "get_allocator", "prune_infeasible", "tally",
]

Allocator = Callable[[AllocationProblem], Allocation]
ALLOCATORS: Mapping[str, Allocator] = MappingProxyType(
    {"alg2": allocate_alg2, "exact": allocate_exact})


def get_allocator(name: str) -> Allocator:
    try:
        return ALLOCATORS[name]
    except KeyError:
        raise ValueError(f"unknown allocator {name!r}; valid: {sorted(ALLOCATORS)}") from None


class AllocationMethod(Enum):
    RATE_TABLE = "rate_table"
    DYNAMIC_PROGRAM = "dynamic_program"
    FIXED = "fixed"


@dataclass(frozen=True)
class OtasSnapshot:
    """What the policy sees: the batch queue, the arrival rate over the last window and when
    service started (for the initial-stage switch)."""

    batches: tuple[QueuedBatch, ...]
    arrival_rate_qps: float
    service_start_s: float = 0.0


@dataclass(frozen=True)
class OtasDecision:
    """Run `run_request_ids` (batch `run_batch_id`) at `gamma` now; drop `evicted_request_ids`.
    `problem` is the allocation instance when a dynamic program decided (for offline analysis)."""

    run_batch_id: int | None
    run_request_ids: tuple[int, ...]
    gamma: int | None
    evicted_request_ids: tuple[int, ...]
    method: AllocationMethod
    expected_utility: float = 0.0
    problem: AllocationProblem | None = None


@dataclass(frozen=True)
class PruneResult:
    batches: tuple[QueuedBatch, ...]  # survivors sorted by (deadline, batch id)
    evicted_request_ids: tuple[int, ...]


def prune_infeasible(batches: tuple[QueuedBatch, ...], now_s: float, profile: TokenProfile,
                     gamma_indices: Sequence[int]) -> PruneResult:
    """Evict queries whose deadline is missed even if their batch starts now at the fastest of
    `gamma_indices`. One pass suffices: a smaller batch is never slower (latency tables are
    non-decreasing in the batch size)."""
    kept: list[QueuedBatch] = []
    evicted: list[int] = []
    for batch in batches:
        finish_s = now_s + min(profile.batch_latency_s(batch.task_counts, g)
                               for g in gamma_indices)
        if finish_s < batch.deadline_s:
            kept.append(batch)
            continue
        late = {r.request_id for r in batch.requests if finish_s >= r.deadline_s}
        evicted.extend(sorted(late))
        rest = batch.without(late)
        if rest is not None:
            kept.append(rest)
    kept.sort(key=lambda b: (b.deadline_s, b.batch_id))
    return PruneResult(tuple(kept), tuple(evicted))


def build_problem(batches: tuple[QueuedBatch, ...], now_s: float,
                  profile: TokenProfile) -> AllocationProblem:
    """Latency and expected utility of every (batch, gamma); batches already deadline-sorted."""
    gammas = range(len(profile.gammas))
    return AllocationProblem(
        now_s,
        tuple(b.deadline_s for b in batches),
        tuple(tuple(profile.batch_latency_s(b.task_counts, g) for g in gammas) for b in batches),
        tuple(tuple(profile.expected_utility(b.task_utility, g) for g in gammas) for b in batches),
    )


class OtasPolicy:
    """OTAS online token adaptation (Algorithms 2 and 3 with the switch rule)."""

    def __init__(self, profile: TokenProfile, rate_table: RateTable, allocator: str = "alg2",
                 switch: SwitchRule | None = None, kappa: float = 0.8) -> None:
        self.profile = profile
        self.rate_table = rate_table
        self.allocator_name = allocator
        self._allocate = get_allocator(allocator)
        self.switch = switch if switch is not None else SwitchRule()
        self.kappa = kappa
        self._all_gammas = tuple(range(len(profile.gammas)))
        for row in rate_table.rows:
            profile.gamma_index(row.gamma)  # fail early on a gamma the profile lacks

    def decide(self, snapshot: OtasSnapshot, now_s: float) -> OtasDecision:
        pruned = prune_infeasible(snapshot.batches, now_s, self.profile, self._all_gammas)
        batches = pruned.batches
        if not batches:  # everything queued was infeasible: evict it, run nothing
            return OtasDecision(None, (), None, pruned.evicted_request_ids,
                                AllocationMethod.RATE_TABLE, 0.0, None)
        problem = build_problem(batches, now_s, self.profile)
        if self.switch.use_rate_table(len(batches), now_s, snapshot.service_start_s):
            gi = self.profile.gamma_index(self.rate_table.gamma_for(snapshot.arrival_rate_qps))
            plan = allocate_rate_table(problem, [b.mean_utility for b in batches], gi, self.kappa)
            method, kept_problem = AllocationMethod.RATE_TABLE, None
        else:
            plan = self._allocate(problem)
            method, kept_problem = AllocationMethod.DYNAMIC_PROGRAM, problem
        first = plan.first_executed()
        if first is None:
            return OtasDecision(None, (), None, pruned.evicted_request_ids, method, 0.0,
                                kept_problem)
        gamma_index = plan.gamma_indices[first]
        assert gamma_index is not None
        chosen = batches[first]
        return OtasDecision(chosen.batch_id, tuple(r.request_id for r in chosen.requests),
                            self.profile.gammas[gamma_index], pruned.evicted_request_ids,
                            method, plan.expected_utility, kept_problem)


class FixedGammaPolicy:
    """Baseline: earliest-deadline batch first at one fixed gamma, evicting what cannot make it."""

    def __init__(self, profile: TokenProfile, gamma: int) -> None:
        self.profile = profile
        self.gamma = gamma
        self._gamma_index = profile.gamma_index(gamma)

    def decide(self, snapshot: OtasSnapshot, now_s: float) -> OtasDecision:
        pruned = prune_infeasible(snapshot.batches, now_s, self.profile, (self._gamma_index,))
        if not pruned.batches:
            return OtasDecision(None, (), None, pruned.evicted_request_ids,
                                AllocationMethod.FIXED)
        chosen = pruned.batches[0]
        utility = self.profile.expected_utility(chosen.task_utility, self._gamma_index)
        return OtasDecision(chosen.batch_id, tuple(r.request_id for r in chosen.requests),
                            self.gamma, pruned.evicted_request_ids, AllocationMethod.FIXED,
                            utility)
