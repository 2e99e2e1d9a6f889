"""The OTAS experiment: OTAS (Algorithm 2 and the exact allocator) and every fixed gamma on one
seeded trace, side by side (docs/otas.md); the policy and rate-table registries it uses.

Two settings (`SETTINGS`). "served" (default): the worker is a replica running one
`policies.schedulers.otas.OtasScheduler` per task through the replicas' scheduling step
(served.py), so a batch holds one task. "paper": the paper's execution model, kept to reproduce
the published figures: the `OtasPolicy` / `FixedGammaPolicy` objects that scheduler wraps, over
one batch queue whose batches mix tasks (sim.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.sim.otas.profile import TABLE_II, figure4_profile
from app.sim.otas.report import experiment_report
from app.sim.otas.served import simulate_served
from app.sim.otas.sim import SimRun, TokenPolicy, simulate
from app.sim.otas.trace import PAPER_LEVEL_SKEW, TraceQuery, fluctuating_poisson_trace
from policies.profile import Profile
from policies.schedulers.base import Scheduler
from policies.schedulers.otas import OtasScheduler
from policies.schedulers.params import FixedGammaParams, OtasParams
from policies.schedulers.plan_types import OtasPlan
from policies.tokens.api import (
    BatchingParams,
    FixedGammaPolicy,
    OtasPolicy,
    RateTable,
    SwitchRule,
    TokenProfile,
)

# Named load setups (serving efficiency, trace level skew), see docs/otas.md:
# "paper": the worker sustains Table I's rates and the trace has the paper's implied mean load;
# "raw": Figure 4b's throughput and uniform levels (the first version of this experiment).
SETUPS: dict[str, tuple[float | None, float]] = {"paper": (None, PAPER_LEVEL_SKEW),
                                                 "raw": (1.0, 1.0)}
SETTINGS = ("served", "paper")


def load_profile(profile_json: str | Path | None,
                 serving_efficiency: float | None = None) -> Profile:
    """The measured profile at `profile_json` (policies.profile format, used as measured), else
    the synthetic Figure 4 profile at `serving_efficiency` (None: Table I's, see otas_profile)."""
    if profile_json is None:
        return figure4_profile(serving_efficiency=serving_efficiency)
    return Profile.from_dict(json.loads(Path(profile_json).read_text()))


def make_policy(name: str, profile: TokenProfile, rate_table: RateTable,
                switch: SwitchRule, kappa: float) -> TokenPolicy:
    """Registry: "otas-alg2", "otas-exact", "fixed<gamma>" (e.g. "fixed0", "fixed-15"), and the
    ablations "otas-alg2-dponly" / "otas-exact-dponly" (dynamic program always, no switch)."""
    if name.startswith("otas-"):
        allocator = name.removeprefix("otas-").removesuffix("-dponly")
        if name.endswith("-dponly"):
            switch = SwitchRule(beta=0, initial_stage_s=0.0)
        return OtasPolicy(profile, rate_table, allocator, switch, kappa)
    if name.startswith("fixed"):
        return FixedGammaPolicy(profile, int(name.removeprefix("fixed")))
    raise _unknown(name, profile)


def _unknown(name: str, profile: TokenProfile) -> ValueError:
    valid = ["otas-alg2", "otas-exact", "otas-alg2-dponly", "otas-exact-dponly"] + [
        f"fixed{g}" for g in profile.gammas]
    return ValueError(f"unknown policy {name!r}; valid: {valid}")


def scheduler_plan(name: str, raw: Profile, profile: TokenProfile, rate_table: RateTable,
                   switch: SwitchRule, kappa: float) -> OtasPlan:
    """The plan file a replica would read for the policy `name` (as `make_policy`): this rate
    table, switch rule, kappa and allocator; p95 latencies; Algorithm 1's default thresholds,
    as the paper setting's."""
    if not name.startswith(("otas-", "fixed")):
        raise _unknown(name, profile)
    otas = name.startswith("otas-")
    if otas and name.endswith("-dponly"):
        switch = SwitchRule(beta=0, initial_stage_s=0.0)
    allocator = name.removeprefix("otas-").removesuffix("-dponly") if otas else "alg2"
    return OtasPlan(raw.name, "p95", profile.max_batch_size, rate_table, BatchingParams(),
                    switch, kappa, allocator)


def scheduler_params(name: str) -> OtasParams | FixedGammaParams:
    """`otas` for "otas-*" (everything from the plan), `fixed_gamma` at the named gamma."""
    if name.startswith("otas-"):
        return OtasParams()
    return FixedGammaParams(gamma=int(name.removeprefix("fixed")))


def make_scheduler(name: str, raw: Profile, profile: TokenProfile, rate_table: RateTable,
                   switch: SwitchRule, kappa: float) -> Scheduler:
    """The policy `name` as a replica runs it: an `OtasScheduler` (one per task)."""
    plan = scheduler_plan(name, raw, profile, rate_table, switch, kappa)
    return OtasScheduler(raw, plan, scheduler_params(name))


def rate_table_for(kind: str, profile: TokenProfile, headroom: float) -> RateTable:
    """"paper" = Table I; "profile" = derived from the profile's batch-64 throughput."""
    if kind == "paper":
        return RateTable.paper_table_i()
    if kind != "profile":
        raise ValueError(f"unknown rate table {kind!r}; valid: ['paper', 'profile']")
    size = profile.max_batch_size
    thr = [size / profile.batch_latency_s({t: size for t in profile.tasks[:1]}, g)
           for g in range(len(profile.gammas))]
    acc = [sum(profile.accuracy[t][g] for t in profile.tasks) / len(profile.tasks)
           for g in range(len(profile.gammas))]
    return RateTable.from_throughput(profile.gammas, thr, acc, headroom)


def run_otas_experiment(duration_s: int = 120, seed: int = 0, min_qps: float = 200.0,
                        max_qps: float = 700.0, profile_json: str | Path | None = None,
                        policies: Sequence[str] | None = None, rate_table: str = "profile",
                        headroom: float = 0.9, beta: int = 5, initial_stage_s: float = 2.0,
                        kappa: float = 0.8, baseline: str = "fixed0",
                        shortfall: bool = True, serving_efficiency: float | None = None,
                        level_skew: float = PAPER_LEVEL_SKEW,
                        setting: str = "served") -> dict[str, Any]:
    """OTAS vs fixed gammas on one seeded trace; returns a JSON-ready dict (see docs/otas.md).
    `serving_efficiency` (synthetic profile only; None = Table I's 0.631, 1.0 = Figure 4b raw)
    and `level_skew` (1.0 = uniform levels, 3.5 = the paper-calibrated trace) set the load;
    `setting` is "served" or "paper" (module doc)."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown OTAS setting {setting!r}; valid: {list(SETTINGS)}")
    raw = load_profile(profile_json, serving_efficiency)
    profile = token_profile_from_profile(raw)
    names = list(policies) if policies else (
        ["otas-exact", "otas-alg2"] + [f"fixed{g}" for g in profile.gammas])
    trace = fluctuating_poisson_trace(duration_s, min_qps, max_qps, seed, TABLE_II, level_skew)
    table = rate_table_for(rate_table, profile, headroom)
    switch = SwitchRule(beta, initial_stage_s)
    runs = {}
    for name in names:
        keep = shortfall and name.startswith("otas-alg2")
        if setting == "paper":
            policy = make_policy(name, profile, table, switch, kappa)
            runs[name] = simulate(trace, policy, profile, BatchingParams(), keep_problems=keep)
        else:
            runs[name] = _served_run(trace, name, raw, profile, table, switch, kappa, keep)
    config = {"setting": setting, "duration_s": duration_s, "seed": seed, "min_qps": min_qps, "max_qps": max_qps,
              "profile": str(profile_json) if profile_json else "figure4-synthetic",
              "serving_efficiency": raw.metadata.get("serving_efficiency"),
              "level_skew": level_skew, "mean_qps": len(trace) / duration_s,
              "rate_table": rate_table, "headroom": headroom, "beta": beta,
              "initial_stage_s": initial_stage_s, "kappa": kappa, "num_queries": len(trace),
              "rate_rows": [[r.max_qps, r.gamma] for r in table.rows],
              "ceiling_utility": ceiling_utility(trace, profile)}
    return experiment_report(config, runs, baseline)


def _served_run(trace: Sequence[TraceQuery], name: str, raw: Profile, profile: TokenProfile,
                table: RateTable, switch: SwitchRule, kappa: float, keep: bool) -> SimRun:
    """One scheduler per task in the trace, as the live replica keeps them."""
    tasks = sorted({q.request.task for q in trace})
    schedulers = {t: make_scheduler(name, raw, profile, table, switch, kappa) for t in tasks}
    return simulate_served(trace, schedulers, profile, keep_problems=keep)


def token_profile_from_profile(profile: Profile, percentile: str = "p95") -> TokenProfile:
    """A measured `Profile` as OTAS sees it (mapping documented in docs/otas.md): one variant per
    (task, gamma) with `Variant.model` = task, or one model (any names) serving every task; every
    task needs every gamma, and `Variant.gamma` must differ between a model's variants."""
    if not profile.variants:
        raise ValueError(f"profile {profile.name}: no variants")
    return TokenProfile.from_profile(profile, percentile)


def ceiling_utility(trace: Sequence[TraceQuery], profile: TokenProfile) -> float:
    """Oracle bound: every query answered in time at its task's most accurate gamma."""
    return sum(q.request.slo.utility for q in trace
               if q.correct_draw < max(profile.accuracy[profile.task_key(q.request.task)]))
