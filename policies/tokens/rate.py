"""OTAS Algorithm 3 (rate-table allocation with the kappa rule) and the switch rule of III-D.

The rate table is the paper's function f: arrival rate (queries/s) -> gamma (Table I). It can be
taken from the paper or derived from a profile's throughput (`RateTable.from_throughput`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies.tokens.dp import Allocation, AllocationProblem


@dataclass(frozen=True)
class RateRow:
    """Use `gamma` while the arrival rate is at most `max_qps`."""

    max_qps: float
    gamma: int


@dataclass(frozen=True)
class RateTable:
    """f(q): rows by ascending `max_qps`; rates above the last row use the last row's gamma."""

    rows: tuple[RateRow, ...]

    def __post_init__(self) -> None:
        if not self.rows:
            raise ValueError("rate table needs at least one row")
        if any(b.max_qps <= a.max_qps for a, b in zip(self.rows, self.rows[1:], strict=False)):
            raise ValueError("rate table rows must have strictly ascending max_qps")

    def gamma_for(self, qps: float) -> int:
        for row in self.rows:
            if qps <= row.max_qps:
                return row.gamma
        return self.rows[-1].gamma

    @classmethod
    def paper_table_i(cls) -> RateTable:
        """Table I of the paper (profiled on an RTX 4080)."""
        return cls((RateRow(279.999, 8), RateRow(319.999, 4), RateRow(349.999, 2),
                    RateRow(379.999, 0), RateRow(449.999, -5), RateRow(519.999, -10),
                    RateRow(999.999, -15), RateRow(float("inf"), -20)))

    @classmethod
    def from_throughput(cls, gammas: Sequence[int], throughput_qps: Sequence[float],
                        accuracy: Sequence[float], headroom: float = 0.63,
                        max_qps: int = 5000) -> RateTable:
        """For each rate q pick the gamma maximizing accuracy x min(1, headroom x throughput / q)
        (expected goodput); ties go to the larger gamma. headroom 0.63 is the ratio between
        Table I's upper rates and Figure 4's throughputs for gamma in {8, 4, 2, 0, -5, -10}."""
        if not len(gammas) == len(throughput_qps) == len(accuracy) > 0:
            raise ValueError("need one throughput and one accuracy per gamma")
        order = sorted(range(len(gammas)), key=lambda i: -gammas[i])

        def best(q: float) -> int:
            return max(order, key=lambda i: accuracy[i] * min(1.0, headroom * throughput_qps[i] / q))

        rows: list[RateRow] = []
        current = best(1.0)
        for q in range(2, max_qps + 1):
            choice = best(float(q))
            if choice != current:
                rows.append(RateRow(q - 1 + 0.999, gammas[current]))
                current = choice
        rows.append(RateRow(float("inf"), gammas[current]))
        return cls(tuple(rows))


@dataclass(frozen=True)
class SwitchRule:
    """Use Algorithm 3 instead of the dynamic program while the queue holds at most `beta`
    batches or during the first `initial_stage_s` of service (paper: 5 and 2 s)."""

    beta: int = 5
    initial_stage_s: float = 2.0

    def use_rate_table(self, num_batches: int, now_s: float, service_start_s: float) -> bool:
        return num_batches <= self.beta or now_s - service_start_s < self.initial_stage_s


def allocate_rate_table(problem: AllocationProblem, mean_utility: Sequence[float],
                        rate_gamma_index: int, kappa: float = 0.8) -> Allocation:
    """Algorithm 3. Gamma indices follow ascending gamma, so index 0 is min(L) and the last is
    max(L). Every batch is executed: a batch predicted to finish at or after its deadline with
    f(q) gets the smallest gamma, a batch whose mean utility exceeds kappa gets the largest."""
    if len(mean_utility) != problem.num_batches:
        raise ValueError("need one mean utility per batch")
    if not 0 <= rate_gamma_index < problem.num_gammas:
        raise ValueError(f"gamma index {rate_gamma_index} outside 0..{problem.num_gammas - 1}")
    clock, total = problem.now_s, 0.0
    plan: list[int | None] = []
    top = problem.num_gammas - 1
    for b in range(problem.num_batches):
        if clock + problem.latency_s[b][rate_gamma_index] >= problem.deadlines_s[b]:
            gi = 0
        elif mean_utility[b] > kappa:
            gi = top
        else:
            gi = rate_gamma_index
        plan.append(gi)
        clock += problem.latency_s[b][gi]
        if clock < problem.deadlines_s[b]:
            total += problem.utility[b][gi]
    return Allocation(tuple(plan), total, clock)
