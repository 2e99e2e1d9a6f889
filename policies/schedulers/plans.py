"""Plan builders (pure; some expensive) and the runtime forms the schedulers make of plans.

| plan (plan_types.py) | builder                                       | runtime form            |
|----------------------|-----------------------------------------------|-------------------------|
| RamsisPolicySet      | build_ramsis_plan(profile, RamsisPlanSettings) | plan.tables             |
| RamsisTable          | RamsisTable(table)                            | plan.table              |
| LoadGranularPlan     | build_jellyfish_plan, load_granular_plan      | load_granular_policy    |
| MoselPlan            | build_mosel_plan                              | mosel_matrix            |
| OtasPlan             | build_otas_plan                               | (its fields)            |

Every plan keeps the latency-model settings it was built with (`percentile`, `max_batch_size`):
a scheduler loading it rebuilds the same `LatencyModel` from the profile (`plan_model`).
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.modality.api import Strategy, StrategyMatrix, build_matrix, strategy_from_batches
from policies.model_selection.baselines import LoadGranularPolicy, StaticChoice, jellyfish_choice
from policies.model_selection.mdp import build_mdp
from policies.model_selection.mdp_spec import (
    Batching,
    Discretization,
    LoadBalancing,
    MDPSpec,
    Reward,
)
from policies.model_selection.policy_set import generate_policy_set
from policies.model_selection.solve import solve
from policies.model_selection.table import PolicyTable
from policies.profile import LatencyModel, Profile
from policies.schedulers.plan_types import (
    LoadChoice,
    LoadGranularPlan,
    MoselCell,
    MoselPlan,
    OtasPlan,
    RamsisPolicySet,
)
from policies.tokens.api import BatchingParams, RateTable, SwitchRule, TokenProfile


def plan_model(profile: Profile, plan_percentile: str | None, plan_max_batch: int | None,
               percentile: str | None = None, max_batch_size: int | None = None) -> LatencyModel:
    """The latency model a plan was built with; the scheduler's own `percentile` /
    `max_batch_size` override it (defaults: p95, the largest profiled batch size)."""
    return LatencyModel.from_profile(profile, percentile or plan_percentile or "p95",
                                     max_batch_size if max_batch_size is not None
                                     else plan_max_batch)


# --- RAMSIS -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RamsisPlanSettings:
    """What a RAMSIS policy set is solved for.

    Loads are the deployment's (total QPS over `num_workers` replicas) in [min_qps, max_qps],
    on a coarse grid (`coarse_step_qps`, default a quarter of the range) refined until
    neighbours' expected accuracy differs by <= `max_accuracy_gap` (never below
    `min_step_qps`). The MDP's queue bound N is `max_queue` (default: the max batch size, the
    paper's model, where a batch may take the whole queue); a larger N keeps batches capped at
    the max batch size and lets the policy see queues up to N (jobs of many items). `job_size`
    J > 1 plans for calls of J items sharing a deadline (Poisson calls at load / J). `pareto`
    restricts the MDP to the Pareto variants; `intervals` is the slack grid, `iterations` the
    value-iteration backups."""

    slo_s: float
    num_workers: int
    min_qps: float
    max_qps: float
    coarse_step_qps: float | None = None
    max_accuracy_gap: float = 0.01
    min_step_qps: float = 25.0
    percentile: str = "p95"
    max_batch_size: int | None = None
    intervals: int = 100
    iterations: int = 100
    pareto: bool = True
    shortest_queue: bool = False
    max_queue: int | None = None
    reward: Reward = Reward.PER_DECISION
    job_size: int = 1

    def __post_init__(self) -> None:
        if self.slo_s <= 0 or self.num_workers < 1 or not 0 < self.min_qps <= self.max_qps:
            raise ValueError(f"bad RAMSIS plan settings: {self}")


def build_ramsis_plan(profile: Profile, settings: RamsisPlanSettings) -> RamsisPolicySet:
    """A RAMSIS policy set for one deployment: one solved per-worker MDP per anticipated load.
    Cost: one MDP solve per load (seconds each at N = 32, D = 100)."""
    s = settings
    model = LatencyModel.from_profile(profile, s.percentile, s.max_batch_size)
    if s.pareto:
        names = [model.names[i] for i in sorted(model.pareto_indices())]
        model = LatencyModel.from_profile(profile.subset(names), s.percentile, s.max_batch_size)
    balancing = LoadBalancing.SHORTEST_QUEUE if s.shortest_queue else LoadBalancing.ROUND_ROBIN
    cap = model.max_batch_size
    queue = max(cap, s.max_queue or cap)

    def solve_at(load: float) -> PolicyTable:
        spec = MDPSpec(s.slo_s, s.num_workers, load, queue, s.intervals,
                       Discretization.FIXED_LENGTH, balancing, Batching.MAXIMAL, s.reward,
                       max_batch=cap, job_size=s.job_size)
        return PolicyTable.from_solved(solve(build_mdp(spec, model), s.iterations), model.names)

    step = (s.coarse_step_qps if s.coarse_step_qps is not None
            else max((s.max_qps - s.min_qps) / 4, 1.0))
    tables = generate_policy_set(solve_at, s.min_qps, s.max_qps, step, s.max_accuracy_gap,
                                 s.min_step_qps)
    return RamsisPolicySet(profile.name, s.slo_s, s.num_workers, s.percentile, cap, queue,
                           s.reward, s.job_size, balancing, tuple(tables))


# --- Load-granular baselines (Jellyfish+, ModelSwitching) -----------------------------------------


def load_granular_plan(policy: str, model: LatencyModel, slo_s: float, num_workers: int,
                       choices: list[StaticChoice], percentile: str) -> LoadGranularPlan:
    """Per-load choices (e.g. `app.sim.ramsis.calibration.model_switching(...).choices`)."""
    return LoadGranularPlan(policy, slo_s, num_workers, percentile, model.max_batch_size,
                            tuple(LoadChoice(c.load_qps, model.names[c.variant_index],
                                             c.max_batch_size) for c in choices))


def build_jellyfish_plan(profile: Profile, slo_s: float, num_workers: int, loads_qps: list[float],
                         percentile: str = "p95",
                         max_batch_size: int | None = None) -> LoadGranularPlan:
    """Jellyfish+ choices (model, batch cap) per anticipated deployment load (cheap)."""
    model = LatencyModel.from_profile(profile, percentile, max_batch_size)
    choices = [jellyfish_choice(model, slo_s, num_workers, q, model.max_batch_size)
               for q in sorted(loads_qps)]
    return load_granular_plan("jellyfish", model, slo_s, num_workers, choices, percentile)


def load_granular_policy(plan: LoadGranularPlan, model: LatencyModel) -> LoadGranularPolicy:
    choices = [StaticChoice(c.load_qps, model.index(c.variant), c.max_batch_size)
               for c in plan.choices]
    return LoadGranularPolicy(plan.policy, choices)


# --- MOSEL --------------------------------------------------------------------------------------


def all_modality_index(profile: Profile) -> int:
    """The variant with the most modalities (ties: the most accurate)."""
    return max(range(len(profile.variants)),
               key=lambda i: (len(profile.variants[i].variant.modalities),
                              profile.variants[i].accuracy))


def build_mosel_plan(profile: Profile, max_job_size: int = 64, num_levels: int = 20,
                     percentile: str = "mean", max_batch_size: int | None = None,
                     solver: str = "exact") -> MoselPlan:
    """MOSEL's strategy matrix P[job size][accuracy level] (section 5.1) over the fusion
    profile's modality variants. Exact solver: well under a second for 3 variants."""
    model = LatencyModel.from_profile(profile, percentile, max_batch_size)
    matrix = build_matrix(model, max_job_size, num_levels, solver=solver)
    cells = tuple(tuple(None if s is None else tuple((b.variant_name, b.batch_size)
                                                      for b in s.batches) for s in row)
                  for row in matrix.cells)
    return MoselPlan(profile.name, percentile, model.max_batch_size, max_job_size, solver,
                     tuple(model.names), model.names[all_modality_index(profile)],
                     tuple(matrix.accuracy_levels), cells)


def mosel_matrix(plan: MoselPlan, model: LatencyModel) -> StrategyMatrix:
    """The matrix with every strategy's latency recomputed from `model` (see `plan_model`)."""

    def strategy(cell: MoselCell | None) -> Strategy | None:
        if cell is None:
            return None
        return strategy_from_batches(model, [(model.index(n), b) for n, b in cell])

    cells = tuple(tuple(strategy(c) for c in row) for row in plan.cells)
    return StrategyMatrix(tuple(model.names), plan.accuracy_levels, cells, plan.solver)


# --- OTAS ---------------------------------------------------------------------------------------


def profile_rate_table(tokens: TokenProfile, headroom: float = 0.9) -> RateTable:
    """f(q) from the profile: per gamma, throughput at the max batch size and mean accuracy."""
    size = tokens.max_batch_size
    thr = [size / tokens.batch_latency_s({tokens.tasks[0]: size}, g)
           for g in range(len(tokens.gammas))]
    acc = [sum(tokens.accuracy[t][g] for t in tokens.tasks) / len(tokens.tasks)
           for g in range(len(tokens.gammas))]
    return RateTable.from_throughput(tokens.gammas, thr, acc, headroom)


def build_otas_plan(profile: Profile, rate_table: str = "profile", headroom: float = 0.9,
                    percentile: str = "p95", max_batch_size: int | None = None,
                    batching: BatchingParams | None = None, switch: SwitchRule | None = None,
                    kappa: float = 0.8, allocator: str = "alg2") -> OtasPlan:
    """OTAS's rate table f: per-replica arrival rate -> gamma ("profile": derived from the
    token-adaptive profile's throughput with `headroom`; "paper": Table I), plus Algorithm 1's
    batching thresholds (the batch cap defaults to the max batch size), the switch rule (default
    beta 5, initial stage 2 s) and kappa."""
    tokens = TokenProfile.from_profile(profile, percentile, max_batch_size)
    if rate_table == "profile":
        table = profile_rate_table(tokens, headroom)
    elif rate_table == "paper":
        table = RateTable.paper_table_i()
    else:
        raise ValueError(f"unknown rate table {rate_table!r}; valid: ['paper', 'profile']")
    return OtasPlan(profile.name, percentile, tokens.max_batch_size, table,
                    batching or BatchingParams(max_batch_size=tokens.max_batch_size),
                    switch or SwitchRule(), kappa, allocator)
