import itertools

import numpy as np

from policies.model_selection.mdp import build_mdp
from policies.model_selection.mdp_spec import MDPSpec
from policies.model_selection.solve import expectations, stationary, value_iteration
from tests.unit.test_transitions import toy_model


def _policy_value(mdp, rows, discount):
    p = mdp.probs[rows]
    r = mdp.row_reward[rows]
    return np.linalg.solve(np.eye(p.shape[0]) - discount * p, r)


def test_value_iteration_matches_brute_force_on_small_mdp():
    spec = MDPSpec(0.1, 2, 80.0, max_queue=2, intervals=3)
    mdp = build_mdp(spec, toy_model())
    choices = [np.nonzero(mdp.row_state == s)[0] for s in range(mdp.space.size)]
    assert np.prod([len(c) for c in choices]) > 4  # a real choice exists
    discount = 0.9
    best = None
    for combo in itertools.product(*choices):
        v = _policy_value(mdp, np.array(combo), discount)
        best = v if best is None else np.maximum(best, v)
    rows = value_iteration(mdp, iterations=2000, discount=discount, tolerance=1e-12)
    np.testing.assert_allclose(_policy_value(mdp, rows, discount), best, atol=1e-7)


def test_stationary_distribution_is_a_fixed_point():
    mdp = build_mdp(MDPSpec(0.1, 3, 120.0, max_queue=5, intervals=10), toy_model())
    rows = value_iteration(mdp)
    dist = stationary(mdp, rows, max_iterations=5000, tolerance=1e-15)
    np.testing.assert_allclose(dist @ mdp.probs[rows], dist, atol=1e-10)
    acc, viol = expectations(mdp, rows)
    assert 0.6 <= acc <= 0.85 and 0.0 <= viol <= 1.0


def test_first_best_action_breaks_ties_toward_lowest_model():
    mdp = build_mdp(MDPSpec(0.1, 3, 120.0, max_queue=5, intervals=10), toy_model())
    rows = value_iteration(mdp)
    for s, r in enumerate(rows):
        assert mdp.row_state[r] == s
