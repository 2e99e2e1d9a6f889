"""Utility accounting by OTAS's four query outcomes (section V, "The execution type of a query").

Type 1: accurate result within the deadline (earns the query's utility); type 2: wrong result
within the deadline; type 3: a result after the deadline; type 4: evicted before execution
because its deadline could no longer be met. Only type 1 earns utility (problem (1)).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from policies.types import Outcome


class QueryType(Enum):
    ACCURATE_IN_TIME = 1
    WRONG_IN_TIME = 2
    LATE = 3
    EVICTED = 4

    @property
    def outcome(self) -> Outcome:
        """The project-wide outcome (correctness is not part of `Outcome`)."""
        if self is QueryType.EVICTED:
            return Outcome.DROPPED
        if self is QueryType.LATE:
            return Outcome.SERVED_LATE
        return Outcome.SERVED_IN_TIME


def classify(finish_s: float | None, deadline_s: float, correct: bool) -> QueryType:
    """`finish_s` None means evicted. In time means strictly before the deadline, as in (1a)."""
    if finish_s is None:
        return QueryType.EVICTED
    if finish_s >= deadline_s:
        return QueryType.LATE
    return QueryType.ACCURATE_IN_TIME if correct else QueryType.WRONG_IN_TIME


def utility_earned(query_type: QueryType, utility: float) -> float:
    return utility if query_type is QueryType.ACCURATE_IN_TIME else 0.0


@dataclass(frozen=True)
class QueryResult:
    """How one query ended. `gamma` is None for evicted queries."""

    request_id: int
    query_type: QueryType
    utility: float
    gamma: int | None = None
    finish_s: float | None = None

    @property
    def utility_earned(self) -> float:
        return utility_earned(self.query_type, self.utility)


@dataclass(frozen=True)
class UtilityTally:
    """Totals over many queries."""

    total_utility: float
    num_queries: int
    counts: dict[QueryType, int] = field(default_factory=dict)
    offered_utility: float = 0.0

    def ratio(self, query_type: QueryType) -> float:
        return self.counts.get(query_type, 0) / self.num_queries if self.num_queries else 0.0

    def to_dict(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {"total_utility": self.total_utility,
                                       "offered_utility": self.offered_utility,
                                       "num_queries": self.num_queries}
        for qt in QueryType:
            out[f"type{qt.value}_{qt.name.lower()}"] = self.counts.get(qt, 0)
        return out


def tally(results: Iterable[QueryResult]) -> UtilityTally:
    counts = dict.fromkeys(QueryType, 0)
    total = offered = 0.0
    n = 0
    for r in results:
        counts[r.query_type] += 1
        total += r.utility_earned
        offered += r.utility
        n += 1
    return UtilityTally(total, n, counts, offered)
