"""MOSEL modality selection: public entry point.

Offline (section 5.1): `build_matrix` fills P[job size][accuracy level] with the least-latency
strategy (batches, each on one modality combination) meeting the level, with the exact Pareto
DP (`solver="exact"`) or GEKKO/APOPT (`solver="gekko"`). Online (section 5.2 / 7.1): the
policies re-plan a worker's EDF queue over that matrix (`make_policy`). See docs/mosel.md.
"""

from policies.modality.matrix import (
    ACCURACY_EPS,
    Strategy,
    StrategyBatch,
    StrategyFrontier,
    accuracy_grid,
    build_frontier,
    level_index,
    meets_accuracy,
    strategy_from_batches,
)
from policies.modality.online import (
    ABLATION_NAMES,
    POLICY_NAMES,
    AggressivePolicy,
    AgnosticPolicy,
    DropReason,
    JobAssignment,
    JobDrop,
    ModalityPolicy,
    ModalityQueueSnapshot,
    OptimizedPolicy,
    QueuedJob,
    QueuePlan,
    RandomPolicy,
    make_policy,
)
from policies.modality.replan import (
    DEADLINE_EPS_S,
    DROP_RULES,
    CandidateSet,
    ReplanJob,
    ReplanOutcome,
    drop_fewest,
    drop_pass,
    is_feasible,
    replan,
    replan_exact,
    replan_greedy,
)
from policies.modality.solvers import (
    CellSolver,
    StrategyMatrix,
    build_matrix,
    get_solver,
    solve_cell_exact,
    solve_cell_gekko,
)
from policies.modality.tables import ModalityTables

__all__ = [
    "ABLATION_NAMES", "ACCURACY_EPS", "DEADLINE_EPS_S", "DROP_RULES", "POLICY_NAMES", "AggressivePolicy", "AgnosticPolicy",
    "CandidateSet", "CellSolver", "DropReason", "JobAssignment", "JobDrop", "ModalityPolicy",
    "ModalityQueueSnapshot", "ModalityTables", "OptimizedPolicy", "QueuePlan", "QueuedJob",
    "RandomPolicy", "ReplanJob", "ReplanOutcome", "Strategy", "StrategyBatch",
    "StrategyFrontier", "StrategyMatrix", "accuracy_grid", "build_frontier", "build_matrix",
    "drop_fewest", "drop_pass", "get_solver", "is_feasible", "level_index", "make_policy", "meets_accuracy",
    "replan", "replan_exact", "replan_greedy", "solve_cell_exact", "solve_cell_gekko",
    "strategy_from_batches",
]
