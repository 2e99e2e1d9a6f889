"""Reward.PER_QUERY: the policy maximizes accuracy per query (late queries count 0), not per batch."""

import itertools

import numpy as np
import pytest

from app.sim.ramsis.planning import _spec_key, plan_policy_set
from policies.model_selection.mdp import build_mdp
from policies.model_selection.mdp_spec import MDPSpec, Reward
from policies.model_selection.solve import (
    expectations,
    per_query_rows,
    query_reward_rate,
    solve,
    value_iteration,
)
from tests.helpers.toy_profiles import toy_model


@pytest.mark.parametrize(("workers", "load", "max_queue", "intervals"),
                         [(1, 30.0, 4, 3), (1, 60.0, 3, 4), (2, 80.0, 2, 3)])
def test_per_query_policy_matches_brute_force(workers, load, max_queue, intervals):
    spec = MDPSpec(0.1, workers, load, max_queue=max_queue, intervals=intervals,
                   reward=Reward.PER_QUERY)
    mdp = build_mdp(spec, toy_model())
    choices = [np.nonzero(mdp.row_state == s)[0] for s in range(mdp.space.size)]
    best = max(query_reward_rate(mdp, np.array(c)) for c in itertools.product(*choices))
    rows = per_query_rows(mdp)
    assert query_reward_rate(mdp, rows) == pytest.approx(best, abs=1e-9)
    assert query_reward_rate(mdp, value_iteration(mdp)) <= best + 1e-12


def test_per_decision_reward_is_suboptimal_per_query_where_batches_vary():
    """One worker at 30 QPS: the per-batch optimum runs the slow model on small batches and pays
    for it on the large ones; per query it loses more than a point."""
    mdp = build_mdp(MDPSpec(0.1, 1, 30.0, max_queue=4, intervals=3), toy_model())
    assert (query_reward_rate(mdp, per_query_rows(mdp))
            > query_reward_rate(mdp, value_iteration(mdp)) + 0.01)


def test_query_reward_rate_is_accuracy_times_satisfaction():
    mdp = build_mdp(MDPSpec(0.1, 3, 120.0, max_queue=5, intervals=10), toy_model())
    rows = value_iteration(mdp)
    acc, viol = expectations(mdp, rows)
    assert query_reward_rate(mdp, rows) == pytest.approx((1 - viol) * acc, abs=1e-9)


def test_solve_follows_the_spec_reward():
    base = MDPSpec(0.1, 1, 30.0, max_queue=4, intervals=3)
    per_decision = solve(build_mdp(base, toy_model()))
    per_query = solve(build_mdp(MDPSpec(0.1, 1, 30.0, max_queue=4, intervals=3,
                                        reward=Reward.PER_QUERY), toy_model()))
    rate = lambda s: query_reward_rate(s.mdp, s.row_of_state)  # noqa: E731
    assert rate(per_query) > rate(per_decision)


def test_cache_key_and_policy_set_carry_the_reward(tmp_path):
    model = toy_model()
    a = MDPSpec(0.1, 2, 80.0, max_queue=4, intervals=5)
    b = MDPSpec(0.1, 2, 80.0, max_queue=4, intervals=5, reward=Reward.PER_QUERY)
    assert _spec_key(a, model, 100) != _spec_key(b, model, 100)
    tables = plan_policy_set(b, model, 40.0, 80.0, 40.0, tmp_path)
    for t in tables:
        spec = MDPSpec(0.1, 2, t.load_qps, max_queue=4, intervals=5, reward=Reward.PER_QUERY)
        assert t.expected_accuracy == pytest.approx(solve(build_mdp(spec, model)).expected_accuracy)
