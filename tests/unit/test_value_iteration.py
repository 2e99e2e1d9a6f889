import itertools

import numpy as np
import pytest

from policies.model_selection.mdp import build_mdp
from policies.model_selection.mdp_spec import MDPSpec
from policies.model_selection.solve import expectations, stationary, value_iteration
from tests.helpers.toy_profiles import toy_model


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


def _simulated_expectations(mdp, rows, steps, seed):
    """Accuracy per on-time query and violation rate from walking the policy's chain."""
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(mdp.probs[rows], axis=1)
    visits = np.zeros(mdp.space.size)
    state = mdp.space.empty
    for u in rng.random(steps):
        visits[state] += 1
        state = min(int(np.searchsorted(cumulative[state], u, side="right")), mdp.space.size - 1)
    served = visits * mdp.row_batch[rows]
    late = mdp.row_late[rows]
    on_time = served * ~late
    accuracy = np.asarray(mdp.accuracy)[np.clip(mdp.row_model[rows], 0, None)]
    return (on_time * accuracy).sum() / on_time.sum(), (served * late).sum() / served.sum()


@pytest.mark.parametrize(("load", "viol_tolerance"), [(120.0, 5e-4), (180.0, 3e-3)])
def test_expectations_match_a_walk_of_the_chain(load, viol_tolerance):
    """The closed-form expectations (stationary distribution, batch-weighted) agree with 100k
    steps of the chain itself; at 180 QPS about 2 % of queries are late."""
    mdp = build_mdp(MDPSpec(0.1, 3, load, max_queue=5, intervals=10), toy_model())
    rows = value_iteration(mdp)
    acc, viol = expectations(mdp, rows)
    sim_acc, sim_viol = _simulated_expectations(mdp, rows, 100_000, seed=0)
    assert acc == pytest.approx(sim_acc, abs=2e-3)
    assert viol == pytest.approx(sim_viol, abs=viol_tolerance)


def test_more_load_buys_speed_with_accuracy_and_deadlines():
    """Rising load moves the policy to faster models (accuracy falls) and, once the fastest
    model cannot keep up, to late queries; far past capacity only the fastest model is left."""
    loads = (30.0, 120.0, 240.0, 400.0)
    results = [expectations(mdp, value_iteration(mdp)) for mdp in
               (build_mdp(MDPSpec(0.1, 3, q, max_queue=5, intervals=10), toy_model())
                for q in loads)]
    accs, viols = zip(*results, strict=True)
    assert list(accs) == sorted(accs, reverse=True) and len(set(accs)) == len(accs)
    assert list(viols) == sorted(viols) and len(set(viols)) == len(viols)
    assert accs[0] > 0.84 and viols[0] < 1e-4  # light: almost all on the 0.85 model, on time
    assert accs[-1] == pytest.approx(0.6) and viols[-1] > 0.1  # overload: fastest only, late


def test_first_best_action_breaks_ties_toward_lowest_model():
    mdp = build_mdp(MDPSpec(0.1, 3, 120.0, max_queue=5, intervals=10), toy_model())
    rows = value_iteration(mdp)
    for s, r in enumerate(rows):
        assert mdp.row_state[r] == s
