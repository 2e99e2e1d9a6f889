"""A RAMSIS policy set over loads (§6 "Query Load Adaptation"): adjacent policies differ by at
most `max_accuracy_gap` in expected accuracy, refined by bisection of the load range."""

from __future__ import annotations

from collections.abc import Callable

from policies.model_selection.table import PolicyTable

SolveAt = Callable[[float], PolicyTable]


def generate_policy_set(solve_at: SolveAt, min_qps: float, max_qps: float, coarse_step_qps: float,
                        max_accuracy_gap: float = 0.01, min_step_qps: float = 25.0,
                        on_policy: Callable[[PolicyTable], None] | None = None) -> list[PolicyTable]:
    """Policies on a coarse grid, then midpoints inserted wherever neighbours' expected accuracy
    differs by more than the gap (until loads are `min_step_qps` apart)."""
    if not 0 < min_qps <= max_qps or coarse_step_qps <= 0:
        raise ValueError(f"bad load range [{min_qps}, {max_qps}] step {coarse_step_qps}")
    done: dict[float, PolicyTable] = {}

    def get(load: float) -> PolicyTable:
        if load not in done:
            done[load] = solve_at(load)
            if on_policy is not None:
                on_policy(done[load])
        return done[load]

    loads = []
    load = min_qps
    while load < max_qps:
        loads.append(load)
        load += coarse_step_qps
    loads.append(max_qps)
    pending = [(lo, hi) for lo, hi in zip(loads, loads[1:], strict=False)]
    for value in loads:
        get(value)
    while pending:
        lo, hi = pending.pop()
        gap = abs(get(lo).expected_accuracy - get(hi).expected_accuracy)
        if gap > max_accuracy_gap and hi - lo > min_step_qps:
            mid = round((lo + hi) / 2, 3)
            get(mid)
            pending.extend([(lo, mid), (mid, hi)])
    return [done[k] for k in sorted(done)]
