"""Plan builders and loaders for the replica schedulers (pure; JSON-compatible dicts).

Every plan is a dict with `kind`, `format_version` and `plan_id` (a short content hash), plus
the latency-model settings it was built with (`percentile`, `max_batch_size`): a scheduler
loading the plan rebuilds the same `LatencyModel` from the profile. Builders may be expensive
(RAMSIS solves MDPs); loaders are cheap. Formats are documented in docs/schedulers.md.

| kind                | builder                  | loader                  | used by              |
|---------------------|--------------------------|-------------------------|----------------------|
| ramsis_policy_set   | build_ramsis_plan        | load_ramsis_tables      | ramsis               |
| ramsis_table        | ramsis_table_plan        | load_ramsis_tables      | ramsis (update_plan) |
| load_granular       | build_jellyfish_plan,    | load_load_granular      | jellyfish,           |
|                     | load_granular_plan       |                         | modelswitching       |
| mosel_matrix        | build_mosel_plan         | load_mosel_matrix       | mosel, all_modalities|
| otas_rate_table     | build_otas_plan          | load_otas_plan          | otas (fixed_gamma)   |
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

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
from policies.tokens.api import BatchingParams, RateRow, RateTable, SwitchRule, TokenProfile

FORMAT_VERSION = 1


def _finish(plan: dict[str, Any]) -> dict[str, Any]:
    """Stamp `format_version` and a content hash `plan_id`."""
    plan["format_version"] = FORMAT_VERSION
    body = json.dumps({k: v for k, v in plan.items() if k != "plan_id"}, sort_keys=True)
    plan["plan_id"] = hashlib.sha256(body.encode()).hexdigest()[:12]
    return plan


def check_plan(plan: dict[str, Any], *kinds: str) -> None:
    """Raise ValueError unless `plan` is one of `kinds` at this format version."""
    if plan.get("kind") not in kinds:
        raise ValueError(f"plan kind {plan.get('kind')!r} unsupported here; want one of {kinds}")
    if plan.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"plan format_version {plan.get('format_version')!r} unsupported "
                         f"(want {FORMAT_VERSION})")


def plan_model(profile: Profile, plan: dict[str, Any] | None,
               params: dict[str, Any]) -> LatencyModel:
    """The latency model a plan was built with (params override; defaults p95, largest
    profiled batch size)."""
    src = plan or {}
    percentile = str(params.get("percentile", src.get("percentile", "p95")))
    max_batch = params.get("max_batch_size", src.get("max_batch_size"))
    return LatencyModel.from_profile(profile, percentile,
                                     None if max_batch is None else int(max_batch))


# --- RAMSIS -------------------------------------------------------------------------------------


def build_ramsis_plan(profile: Profile, slo_s: float, num_workers: int, min_qps: float,
                      max_qps: float, coarse_step_qps: float | None = None,
                      max_accuracy_gap: float = 0.01, min_step_qps: float = 25.0,
                      percentile: str = "p95", max_batch_size: int | None = None,
                      intervals: int = 100, iterations: int = 100, pareto: bool = True,
                      shortest_queue: bool = False, max_queue: int | None = None,
                      reward: Reward = Reward.PER_DECISION, job_size: int = 1) -> dict[str, Any]:
    """A RAMSIS policy set for one deployment: one solved per-worker MDP per anticipated
    deployment load (total QPS over `num_workers` replicas) in [min_qps, max_qps], refined
    until neighbours' expected accuracy differs by <= `max_accuracy_gap`. The MDP's queue bound
    N is `max_queue` (default: the max batch size, the paper's model, where a batch may take the
    whole queue); a larger N keeps batches capped at the max batch size and lets the policy see
    queues up to N (jobs of many items) instead of lumping them into the full-queue state.
    `job_size` J > 1 plans for calls of J items sharing a deadline (Poisson calls at load / J).
    Cost: one MDP solve per load (seconds each at N = 32, D = 100)."""
    model = LatencyModel.from_profile(profile, percentile, max_batch_size)
    if pareto:
        names = [model.names[i] for i in sorted(model.pareto_indices())]
        model = LatencyModel.from_profile(profile.subset(names), percentile, max_batch_size)
    balancing = LoadBalancing.SHORTEST_QUEUE if shortest_queue else LoadBalancing.ROUND_ROBIN

    cap = model.max_batch_size
    queue = max(cap, max_queue or cap)

    def solve_at(load: float) -> PolicyTable:
        spec = MDPSpec(slo_s, num_workers, load, queue, intervals, Discretization.FIXED_LENGTH,
                       balancing, Batching.MAXIMAL, reward, max_batch=cap, job_size=job_size)
        return PolicyTable.from_solved(solve(build_mdp(spec, model), iterations), model.names)

    step = coarse_step_qps if coarse_step_qps is not None else max((max_qps - min_qps) / 4, 1.0)
    tables = generate_policy_set(solve_at, min_qps, max_qps, step, max_accuracy_gap,
                                 min_step_qps)
    return _finish({"kind": "ramsis_policy_set", "profile": profile.name, "slo_s": slo_s,
                    "num_workers": num_workers, "load_scope": "deployment",
                    "percentile": percentile, "max_batch_size": model.max_batch_size,
                    "max_queue": queue, "reward": reward.value, "job_size": job_size,
                    "balancing": balancing.value, "tables": [t.to_dict() for t in tables]})


def ramsis_table_plan(table: PolicyTable) -> dict[str, Any]:
    """One controller-selected table (pins the RAMSIS scheduler to it)."""
    return _finish({"kind": "ramsis_table", "table": table.to_dict()})


def load_ramsis_tables(plan: dict[str, Any]) -> list[PolicyTable]:
    check_plan(plan, "ramsis_policy_set", "ramsis_table")
    if plan["kind"] == "ramsis_table":
        return [PolicyTable.from_dict(plan["table"])]
    return [PolicyTable.from_dict(t) for t in plan["tables"]]


# --- Load-granular baselines (Jellyfish+, ModelSwitching) -----------------------------------------


def load_granular_plan(policy: str, model: LatencyModel, slo_s: float, num_workers: int,
                       choices: list[StaticChoice], percentile: str) -> dict[str, Any]:
    """Serialize per-load choices (e.g. `app.sim.ramsis.calibration.model_switching(...).choices`)."""
    return _finish({"kind": "load_granular", "policy": policy, "slo_s": slo_s,
                    "num_workers": num_workers, "load_scope": "deployment",
                    "percentile": percentile, "max_batch_size": model.max_batch_size,
                    "choices": [{"load_qps": c.load_qps, "variant": model.names[c.variant_index],
                                 "max_batch_size": c.max_batch_size} for c in choices]})


def build_jellyfish_plan(profile: Profile, slo_s: float, num_workers: int, loads_qps: list[float],
                         percentile: str = "p95",
                         max_batch_size: int | None = None) -> dict[str, Any]:
    """Jellyfish+ choices (model, batch cap) per anticipated deployment load (cheap)."""
    model = LatencyModel.from_profile(profile, percentile, max_batch_size)
    choices = [jellyfish_choice(model, slo_s, num_workers, q, model.max_batch_size)
               for q in sorted(loads_qps)]
    return load_granular_plan("jellyfish", model, slo_s, num_workers, choices, percentile)


def load_load_granular(plan: dict[str, Any], model: LatencyModel) -> LoadGranularPolicy:
    check_plan(plan, "load_granular")
    choices = [StaticChoice(float(c["load_qps"]), model.index(str(c["variant"])),
                            int(c["max_batch_size"])) for c in plan["choices"]]
    return LoadGranularPolicy(str(plan.get("policy", "load_granular")), choices)


# --- MOSEL --------------------------------------------------------------------------------------


def all_modality_index(profile: Profile) -> int:
    """The variant with the most modalities (ties: the most accurate)."""
    return max(range(len(profile.variants)),
               key=lambda i: (len(profile.variants[i].variant.modalities),
                              profile.variants[i].accuracy))


def build_mosel_plan(profile: Profile, max_job_size: int = 64, num_levels: int = 20,
                     percentile: str = "mean", max_batch_size: int | None = None,
                     solver: str = "exact") -> dict[str, Any]:
    """MOSEL's strategy matrix P[job size][accuracy level] (section 5.1) over the fusion
    profile's modality variants; each cell lists its batches as [variant name, batch size]
    (null: no strategy reaches the level). Exact solver: well under a second for 3 variants."""
    model = LatencyModel.from_profile(profile, percentile, max_batch_size)
    matrix = build_matrix(model, max_job_size, num_levels, solver=solver)
    cells = [[None if s is None else [[b.variant_name, b.batch_size] for b in s.batches]
              for s in row] for row in matrix.cells]
    return _finish({"kind": "mosel_matrix", "profile": profile.name, "percentile": percentile,
                    "max_batch_size": model.max_batch_size, "max_job_size": max_job_size,
                    "solver": solver, "variant_names": list(model.names),
                    "all_modalities_variant": model.names[all_modality_index(profile)],
                    "accuracy_levels": list(matrix.accuracy_levels), "cells": cells})


def load_mosel_matrix(plan: dict[str, Any], model: LatencyModel) -> StrategyMatrix:
    """The matrix with every strategy's latency recomputed from `model` (see `plan_model`)."""
    check_plan(plan, "mosel_matrix")

    def strategy(cell: list[list[Any]] | None) -> Strategy | None:
        if cell is None:
            return None
        return strategy_from_batches(model, [(model.index(str(n)), int(b)) for n, b in cell])

    cells = tuple(tuple(strategy(c) for c in row) for row in plan["cells"])
    return StrategyMatrix(tuple(model.names), tuple(float(a) for a in plan["accuracy_levels"]),
                          cells, str(plan.get("solver", "exact")))


# --- OTAS ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OtasPlan:
    rate_table: RateTable
    batching: BatchingParams
    switch: SwitchRule
    kappa: float
    allocator: str


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
                    batching: BatchingParams | None = None, beta: int = 5,
                    initial_stage_s: float = 2.0, kappa: float = 0.8,
                    allocator: str = "alg2") -> dict[str, Any]:
    """OTAS's rate table f: per-replica arrival rate -> gamma ("profile": derived from the
    token-adaptive profile's throughput with `headroom`; "paper": Table I), plus Algorithm 1's
    batching thresholds (the batch cap defaults to the max batch size), the switch rule (beta,
    initial stage) and kappa. A row's `max_qps` null means unbounded."""
    tokens = TokenProfile.from_profile(profile, percentile, max_batch_size)
    if rate_table == "profile":
        table = profile_rate_table(tokens, headroom)
    elif rate_table == "paper":
        table = RateTable.paper_table_i()
    else:
        raise ValueError(f"unknown rate table {rate_table!r}; valid: ['paper', 'profile']")
    bp = batching or BatchingParams(max_batch_size=tokens.max_batch_size)
    return _finish({
        "kind": "otas_rate_table", "profile": profile.name, "percentile": percentile,
        "max_batch_size": tokens.max_batch_size, "load_scope": "replica",
        "rate_table": [{"max_qps": None if math.isinf(r.max_qps) else r.max_qps,
                        "gamma": r.gamma} for r in table.rows],
        "batching": {"max_wait_s": bp.max_wait_s, "max_batch_size": bp.max_batch_size,
                     "max_deadline_gap_s": bp.max_deadline_gap_s,
                     "max_utility_gap": bp.max_utility_gap},
        "switch": {"beta": beta, "initial_stage_s": initial_stage_s},
        "kappa": kappa, "allocator": allocator})


def load_otas_plan(plan: dict[str, Any]) -> OtasPlan:
    check_plan(plan, "otas_rate_table")
    rows = tuple(RateRow(math.inf if r["max_qps"] is None else float(r["max_qps"]),
                         int(r["gamma"])) for r in plan["rate_table"])
    b = plan["batching"]
    return OtasPlan(RateTable(rows),
                    BatchingParams(float(b["max_wait_s"]), int(b["max_batch_size"]),
                                   float(b["max_deadline_gap_s"]), float(b["max_utility_gap"])),
                    SwitchRule(int(plan["switch"]["beta"]),
                               float(plan["switch"]["initial_stage_s"])),
                    float(plan["kappa"]), str(plan["allocator"]))
