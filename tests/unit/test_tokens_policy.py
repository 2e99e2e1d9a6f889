"""OTAS batching (Algorithm 1), switch rule, rate table, utility accounting, policy, simulator
(both settings; the served one drives the replicas' `OtasScheduler` objects)."""

from __future__ import annotations

import pytest

from policies.schedulers.base import PendingItem, SchedulerDecision
from policies.schedulers.otas import OtasScheduler
from policies.tokens.api import (
    BatchingParams,
    BatchQueue,
    FixedGammaPolicy,
    OtasPolicy,
    OtasSnapshot,
    QueryResult,
    QueryType,
    RateTable,
    SwitchRule,
    TokenProfile,
    add_query,
    classify,
    tally,
)
from policies.types import SLO, Outcome, Request


def req(rid: int, t: float, latency_s: float = 1.0, utility: float = 0.3,
        task: str = "cifar10") -> Request:
    return Request(rid, t, SLO(latency_s, utility=utility), task=task)


def test_batching_joins_similar_queries() -> None:
    q = add_query(BatchQueue(), req(0, 0.0), BatchingParams())
    q = add_query(q, req(1, 0.1), BatchingParams())
    assert len(q) == 1 and q.batches[0].size == 2


def test_batching_rules_open_new_batches() -> None:
    p = BatchingParams(max_wait_s=0.5, max_batch_size=2, max_deadline_gap_s=0.5,
                       max_utility_gap=0.8)
    q = add_query(BatchQueue(), req(0, 0.0), p)
    q = add_query(q, req(1, 0.6), p)  # waited too long (delta)
    assert len(q) == 2
    q = add_query(q, req(2, 0.6, utility=0.01), p)  # joins batch 1 (|0.3-0.01| <= mu)
    assert len(q) == 2 and q.batches[1].size == 2
    q = add_query(q, req(3, 0.6), p)  # batch 1 full (epsilon)
    assert len(q) == 3
    q = add_query(q, req(4, 0.6, utility=1.2), p)  # 1.2 vs 0.3: utility gap > mu
    assert len(q) == 4
    q = add_query(q, req(5, 0.61, latency_s=0.05), p)  # deadline gap > eta to every batch
    assert len(q) == 5
    q = add_query(q, req(6, 0.62, latency_s=0.05), p)
    assert len(q) == 5 and q.batches[4].size == 2
    assert q.batches[4].deadline_s == 0.66
    assert q.batches[1].arrival_s == 0.6


def test_batch_queue_removal() -> None:
    q = BatchQueue()
    for i in range(3):
        q = add_query(q, req(i, 0.01 * i), BatchingParams())
    q = q.without_requests({0, 2})
    assert [r.request_id for r in q.batches[0].requests] == [1]
    assert len(q.without_requests({1})) == 0


def test_switch_rule() -> None:
    rule = SwitchRule(beta=5, initial_stage_s=2.0)
    assert rule.use_rate_table(5, 10.0, 0.0)
    assert rule.use_rate_table(6, 1.9, 0.0)
    assert not rule.use_rate_table(6, 2.0, 0.0)


def test_rate_tables() -> None:
    t = RateTable.paper_table_i()
    assert [t.gamma_for(q) for q in (1, 300, 330, 360, 400, 500, 700, 1500)] == [
        8, 4, 2, 0, -5, -10, -15, -20]
    derived = RateTable.from_throughput([-15, 0, 8], [1000.0, 580.0, 450.0],
                                        [0.9, 0.95, 0.97], headroom=1.0)
    assert derived.gamma_for(100) == 8
    assert derived.gamma_for(500) == 0
    assert derived.gamma_for(900) == -15


def test_four_outcomes_and_utility() -> None:
    assert classify(None, 1.0, True) is QueryType.EVICTED
    assert classify(1.0, 1.0, True) is QueryType.LATE  # strictly before the deadline
    assert classify(0.5, 1.0, True) is QueryType.ACCURATE_IN_TIME
    assert classify(0.5, 1.0, False) is QueryType.WRONG_IN_TIME
    assert QueryType.EVICTED.outcome is Outcome.DROPPED
    assert QueryType.LATE.outcome is Outcome.SERVED_LATE
    results = [QueryResult(0, QueryType.ACCURATE_IN_TIME, 1.0),
               QueryResult(1, QueryType.WRONG_IN_TIME, 0.3),
               QueryResult(2, QueryType.LATE, 0.3), QueryResult(3, QueryType.EVICTED, 0.2),
               QueryResult(4, QueryType.ACCURATE_IN_TIME, 0.2)]
    t = tally(results)
    assert t.total_utility == 1.2 and t.num_queries == 5
    assert t.counts[QueryType.LATE] == 1 and t.ratio(QueryType.ACCURATE_IN_TIME) == 0.4


def _profile() -> TokenProfile:
    from app.sim.otas.profile import figure4_profile
    return TokenProfile.from_profile(figure4_profile())


def test_policy_evicts_infeasible_and_runs_earliest() -> None:
    profile = _profile()
    q = BatchQueue()
    q = add_query(q, req(0, 0.0, latency_s=0.6), BatchingParams())
    q = add_query(q, req(1, 0.0, latency_s=0.005, utility=1.0),
                  BatchingParams(max_deadline_gap_s=0))
    policy = OtasPolicy(profile, RateTable.paper_table_i())
    d = policy.decide(OtasSnapshot(q.batches, 100.0), now_s=0.0)
    assert d.evicted_request_ids == (1,)
    assert d.run_request_ids == (0,) and d.gamma == 8  # rate 100 qps -> gamma 8
    fixed = FixedGammaPolicy(profile, -15).decide(OtasSnapshot(q.batches, 100.0), 0.0)
    assert fixed.gamma == -15 and fixed.run_request_ids == (0,)


def test_policy_with_only_infeasible_batches_evicts_them_and_runs_nothing() -> None:
    """Found by the live bench's simulator (jobs of 32 under OTAS): once every queued batch was
    infeasible the rate table was asked to allocate zero batches and raised."""
    profile = _profile()
    q = add_query(BatchQueue(), req(1, 0.0, latency_s=0.0001, utility=1.0), BatchingParams())
    d = OtasPolicy(profile, RateTable.paper_table_i()).decide(OtasSnapshot(q.batches, 100.0),
                                                                now_s=0.0)
    assert d.evicted_request_ids == (1,) and d.run_request_ids == () and d.gamma is None


@pytest.mark.parametrize("setting", ["served", "paper"])
def test_simulator_is_deterministic_and_accounts_every_query(setting: str) -> None:
    from app.sim.otas.experiment import run_otas_experiment
    kwargs = dict(duration_s=6, seed=7, policies=["otas-alg2", "otas-exact-dponly", "fixed0"],
                  setting=setting)
    a = run_otas_experiment(**kwargs)  # type: ignore[arg-type]
    b = run_otas_experiment(**kwargs)  # type: ignore[arg-type]
    assert a == b and a["config"]["setting"] == setting
    n = a["config"]["num_queries"]
    for p in a["policies"].values():
        assert sum(p[f"type{k}_{t.name.lower()}"] for k, t in
                   ((t.value, t) for t in QueryType)) == n
    for p in a["policies"].values():  # utility is earned only by queries offered
        assert p["total_utility"] <= p["offered_utility"] == a["policies"]["fixed0"]["offered_utility"]
    if setting == "paper":  # the paper's claim on its own execution model: OTAS beats gamma 0
        assert a["policies"]["otas-alg2"]["total_utility"] > a["policies"]["fixed0"]["total_utility"]


class _Spy(OtasScheduler):
    """An OtasScheduler recording the tasks of the items it is shown and of what it runs."""

    tasks_seen: set[str]
    run_tasks: set[str]

    def decide(self, pending: tuple[PendingItem, ...], now_s: float,
               load_qps: float) -> SchedulerDecision:
        self.tasks_seen = getattr(self, "tasks_seen", set()) | {p.task for p in pending}
        out = super().decide(pending, now_s, load_qps)
        if out.run is not None:
            by_id = {p.item_id: p.task for p in pending}
            self.run_tasks = getattr(self, "run_tasks", set()) | {
                by_id[i] for i in out.run.item_ids}
        return out


def _trace_and_profiles():  # type: ignore[no-untyped-def]
    from app.sim.otas.experiment import load_profile, rate_table_for, token_profile_from_profile
    from app.sim.otas.profile import TABLE_II
    from app.sim.otas.trace import fluctuating_poisson_trace
    raw = load_profile(None)
    profile = token_profile_from_profile(raw)
    trace = fluctuating_poisson_trace(6, 200.0, 700.0, 3, TABLE_II, 3.5)
    return trace, raw, profile, rate_table_for("profile", profile, 0.9)


@pytest.mark.parametrize("name", ["otas-alg2", "fixed0"])
def test_served_setting_runs_the_schedulers_it_is_given(name: str) -> None:
    from app.sim.otas.experiment import scheduler_params, scheduler_plan
    from app.sim.otas.served import simulate_served
    trace, raw, profile, table = _trace_and_profiles()
    plan = scheduler_plan(name, raw, profile, table, SwitchRule(), 0.8)
    spies = {t: _Spy(raw, plan, scheduler_params(name))
             for t in sorted({q.request.task for q in trace})}
    run = simulate_served(trace, spies, profile)
    assert [r.request_id for r in run.results] == sorted(q.request.request_id for q in trace)
    for task, spy in spies.items():
        assert spy.tasks_seen == {task}  # each task's items go to that task's scheduler only
        assert spy.run_tasks == {task}  # so every batch holds one task
    assert sum(run.method_counts.values()) > 0


@pytest.mark.parametrize("setting", ["served", "paper"])
def test_every_query_answered_exactly_once(setting: str) -> None:
    from app.sim.otas.experiment import make_policy, make_scheduler
    from app.sim.otas.served import simulate_served
    from app.sim.otas.sim import simulate
    trace, raw, profile, table = _trace_and_profiles()
    for name in ("otas-exact", "otas-alg2-dponly", "fixed-15", "fixed8"):
        if setting == "paper":
            run = simulate(trace, make_policy(name, profile, table, SwitchRule(), 0.8),
                           profile, BatchingParams())
        else:
            schedulers = {q.request.task: make_scheduler(name, raw, profile, table,
                                                         SwitchRule(), 0.8) for q in trace}
            run = simulate_served(trace, schedulers, profile)
        ids = [r.request_id for r in run.results]
        assert ids == sorted(q.request.request_id for q in trace)  # each once, none missing
