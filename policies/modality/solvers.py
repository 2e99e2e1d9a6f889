"""The strategy matrix P[job size][accuracy level] and the two solvers that fill it.

`exact`: the Pareto DP of `modality_matrix` (all cells of a job size from one front).
`gekko`: the paper's integer program, solved cell by cell by GEKKO/APOPT locally
(`remote=False`); gekko is imported inside the solver so `policies` stays light.
Both answer through `CellSolver`: (model, job size, accuracy SLO) -> Strategy | None.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from policies.modality.matrix import (
    Strategy,
    accuracy_grid,
    build_frontier,
    level_index,
    meets_accuracy,
    strategy_from_batches,
)
from policies.profile import LatencyModel

CellSolver = Callable[[LatencyModel, int, float], Strategy | None]


def solve_cell_exact(model: LatencyModel, job_size: int, accuracy_slo: float) -> Strategy | None:
    """Least-latency strategy for one cell, exact (Pareto DP)."""
    return build_frontier(model, job_size).fastest_meeting(job_size, accuracy_slo)


def solve_cell_gekko(model: LatencyModel, job_size: int, accuracy_slo: float) -> Strategy | None:
    """The INLP of section 5.1 with GEKKO + APOPT: x[k][b] = number of batches of size b on
    combination k. Returns None when APOPT finds no solution or its integer answer fails our
    own exact check (APOPT tolerances are ~1e-6, so its answer is re-verified, not trusted)."""
    from gekko import GEKKO  # lazy: heavy, and only the offline stage needs it

    n = job_size
    m = GEKKO(remote=False)
    m.options.SOLVER = 1
    m.solver_options = ["minlp_gap_tol 1.0e-6", "minlp_integer_tol 1.0e-6",
                        "minlp_maximum_iterations 20000", "objective_convergence_tolerance 1.0e-9"]
    sizes = range(1, min(n, model.max_batch_size) + 1)
    x = {(k, b): m.Var(value=0, lb=0, ub=n // b, integer=True)
         for k in range(len(model.names)) for b in sizes}
    m.Equation(sum(b * v for (_, b), v in x.items()) == n)
    m.Equation(sum(model.accuracy[k] * b * v for (k, b), v in x.items()) >= accuracy_slo * n)
    m.Minimize(sum(model.latency(k, b) * v for (k, b), v in x.items()))
    try:
        m.solve(disp=False)
    except Exception:  # GEKKO raises a bare Exception when APOPT reports infeasible
        return None
    finally:
        m.cleanup()
    picked: list[tuple[int, int]] = []
    for (k, b), v in x.items():
        picked.extend([(k, b)] * int(round(v.value[0])))
    strategy = strategy_from_batches(model, picked) if picked else None
    if strategy is None or strategy.num_requests != n:
        return None
    if not meets_accuracy(strategy.accuracy_points, accuracy_slo, n):
        return None
    return strategy


_SOLVERS: dict[str, CellSolver] = {"exact": solve_cell_exact, "gekko": solve_cell_gekko}


def get_solver(name: str) -> CellSolver:
    """The cell solver registered as `name`."""
    try:
        return _SOLVERS[name]
    except KeyError:
        raise ValueError(f"unknown solver {name!r}; valid: {sorted(_SOLVERS)}") from None


@dataclass(frozen=True)
class StrategyMatrix:
    """P[n - 1][level]: least-latency strategy for job size n at accuracy >= levels[level]."""

    variant_names: tuple[str, ...]
    accuracy_levels: tuple[float, ...]
    cells: tuple[tuple[Strategy | None, ...], ...]
    solver: str

    @property
    def max_job_size(self) -> int:
        return len(self.cells)

    def cell(self, job_size: int, level: int) -> Strategy | None:
        if not 1 <= job_size <= self.max_job_size:
            raise ValueError(f"job size {job_size} outside 1..{self.max_job_size}")
        return self.cells[job_size - 1][level]

    def lookup(self, job_size: int, accuracy_slo: float) -> Strategy | None:
        """Fastest strategy meeting `accuracy_slo` on the grid (next level up: conservative)."""
        level = level_index(self.accuracy_levels, accuracy_slo)
        return None if level is None else self.cell(job_size, level)

    def candidates(self, job_size: int, accuracy_slo: float) -> tuple[Strategy, ...]:
        """Distinct strategies of the row at levels >= the SLO's level, Pareto-filtered:
        latency ascending, accuracy strictly ascending. Empty when the SLO is unreachable."""
        level = level_index(self.accuracy_levels, accuracy_slo)
        if level is None:
            return ()
        row = [s for s in self.cells[job_size - 1][level:] if s is not None]
        row.sort(key=lambda s: (s.latency_s, -s.accuracy_points))
        out: list[Strategy] = []
        for s in row:
            if not out or s.accuracy_points > out[-1].accuracy_points + 1e-12:
                out.append(s)
        return tuple(out)

    def feasible_count(self) -> int:
        return sum(s is not None for row in self.cells for s in row)


def build_matrix(model: LatencyModel, max_job_size: int = 64, num_levels: int = 20,
                 solver: str = "exact",
                 accuracy_levels: tuple[float, ...] | None = None) -> StrategyMatrix:
    """Fill P for job sizes 1..max_job_size x accuracy levels with the named solver."""
    levels = accuracy_levels or accuracy_grid(model, num_levels)
    if any(not math.isfinite(a) for a in levels) or list(levels) != sorted(levels):
        raise ValueError(f"accuracy levels must be finite and ascending, got {levels}")
    cell_solver = get_solver(solver)
    if solver == "exact":
        frontier = build_frontier(model, max_job_size)
        cells = tuple(tuple(frontier.fastest_meeting(n, a) for a in levels)
                      for n in range(1, max_job_size + 1))
    else:
        cells = tuple(tuple(cell_solver(model, n, a) for a in levels)
                      for n in range(1, max_job_size + 1))
    return StrategyMatrix(tuple(model.names), tuple(levels), cells, solver)
