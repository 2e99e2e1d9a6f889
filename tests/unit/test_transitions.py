import random

import numpy as np
import pytest

from policies.model_selection.mdp import build_mdp
from policies.model_selection.mdp_spec import (
    Batching,
    Discretization,
    LoadBalancing,
    MDPSpec,
    StateSpace,
)
from policies.model_selection.transitions import next_state_probs
from tests.helpers.toy_profiles import toy_model


@pytest.mark.parametrize("balancing", list(LoadBalancing))
@pytest.mark.parametrize("batching", list(Batching))
@pytest.mark.parametrize("discretization", list(Discretization))
def test_rows_sum_to_one_for_every_state_action(balancing, batching, discretization):
    spec = MDPSpec(0.1, 4, 150.0, max_queue=6, intervals=10, discretization=discretization,
                   balancing=balancing, batching=batching)
    mdp = build_mdp(spec, toy_model())
    assert np.all(mdp.probs >= 0)
    np.testing.assert_allclose(mdp.probs.sum(axis=1), 1.0, atol=1e-9)
    # every state has at least one action
    assert set(mdp.row_state.tolist()) == set(range(mdp.space.size))


def test_rewards_only_for_batches_meeting_the_head_deadline():
    spec = MDPSpec(0.1, 4, 150.0, max_queue=6, intervals=10)
    model = toy_model()
    mdp = build_mdp(spec, model)
    grid = mdp.space.grid_s
    for r in range(mdp.num_rows):
        s = int(mdp.row_state[r])
        if s in (mdp.space.empty, mdp.space.full):
            assert mdp.row_reward[r] == 0
            continue
        n, j = divmod(s - 1, mdp.space.num_slack)
        lat = model.latency(int(mdp.row_model[r]), int(mdp.row_batch[r]))
        assert (mdp.row_reward[r] > 0) == (lat <= grid[j] + 1e-12)


def _simulate_rr(latency, rate, k, slo, space, g, trials, rng):
    """Monte Carlo of the worker's next state given phase g (its next query is the g-th
    central arrival after the decision)."""
    counts = np.zeros(space.size)
    top = space.num_slack - 1
    for _ in range(trials):
        t, c, own = 0.0, 0, []
        while True:
            t += rng.expovariate(rate)
            if t > latency:
                break
            c += 1
            if c >= g and (c - g) % k == 0:
                own.append(t)
        if not own:
            counts[space.index(1, top)] += 1
        elif len(own) > space.max_queue:
            counts[space.full] += 1
        else:
            counts[space.lookup(len(own), slo - (latency - own[0]))] += 1
    return counts / trials


@pytest.mark.parametrize("g", [1, 3])
def test_round_robin_probabilities_match_monte_carlo(g):
    k, rate, slo, latency = 3, 120.0, 0.1, 0.06
    space = StateSpace(5, np.arange(11) * slo / 10)
    exact = next_state_probs(latency, rate, k, slo, space)[g - 1]
    mc = _simulate_rr(latency, rate, k, slo, space, g, 40000, random.Random(7))
    assert np.abs(exact - mc).max() < 0.01
    np.testing.assert_allclose(exact.sum(), 1.0)


@pytest.mark.parametrize("batching", list(Batching))
@pytest.mark.parametrize("cap", [1, 3])
def test_capped_batches_rows_sum_to_one_and_serve_at_most_the_cap(batching, cap):
    spec = MDPSpec(0.1, 2, 150.0, max_queue=6, intervals=10, batching=batching, max_batch=cap)
    mdp = build_mdp(spec, toy_model())
    assert np.all(mdp.probs >= 0)
    np.testing.assert_allclose(mdp.probs.sum(axis=1), 1.0, atol=1e-9)
    assert set(mdp.row_state.tolist()) == set(range(mdp.space.size))
    assert mdp.row_batch.max() == cap
    if batching is Batching.MAXIMAL:  # queues longer than the cap serve exactly the cap
        for r in range(mdp.num_rows):
            s = int(mdp.row_state[r])
            if s != mdp.space.empty:
                n = mdp.space.max_queue + 1 if s == mdp.space.full else (s - 1) // 11 + 1
                assert mdp.row_batch[r] == min(n, cap)


def test_capped_batch_keeps_the_rest_queued_with_less_slack():
    """Queue 5, cap 2, no arrivals possible in between (rate ~ 0): serving 2 leaves 3 queued with
    the head's slack reduced by the batch latency."""
    spec = MDPSpec(0.1, 1, 1e-9, max_queue=6, intervals=10, max_batch=2)
    model = toy_model()
    mdp = build_mdp(spec, model)
    space = mdp.space
    state = space.index(5, 10)  # slack 0.1 s
    for r in np.nonzero(mdp.row_state == state)[0]:
        lat = model.latency(int(mdp.row_model[r]), 2)
        target = space.index(3, space.slack_index(0.1 - lat))
        assert mdp.row_batch[r] == 2
        assert mdp.probs[r, target] == pytest.approx(1.0)


def test_cap_equal_to_the_queue_bound_is_the_uncapped_mdp():
    base = MDPSpec(0.1, 4, 150.0, max_queue=6, intervals=10)
    a = build_mdp(base, toy_model())
    b = build_mdp(MDPSpec(0.1, 4, 150.0, max_queue=6, intervals=10, max_batch=6), toy_model())
    np.testing.assert_array_equal(a.row_batch, b.row_batch)
    np.testing.assert_allclose(a.probs, b.probs)


@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("job", [2, 4])
def test_job_arrivals_rows_sum_to_one_and_queues_grow_by_whole_jobs(workers, job):
    spec = MDPSpec(0.1, workers, 150.0, max_queue=8, intervals=10, max_batch=3, job_size=job)
    mdp = build_mdp(spec, toy_model())
    assert np.all(mdp.probs >= 0)
    np.testing.assert_allclose(mdp.probs.sum(axis=1), 1.0, atol=1e-9)
    space = mdp.space
    # from the empty queue (wait), the next state is one whole job with the full SLO as slack
    wait = int(np.nonzero(mdp.row_state == space.empty)[0][0])
    target = space.index(job, space.num_slack - 1)
    assert mdp.probs[wait, target] == pytest.approx(1.0)
    # serving a whole queue leaves only multiples of the job size (or the full state)
    n_max = space.max_queue
    for r in range(mdp.num_rows):
        s = int(mdp.row_state[r])
        if s == space.empty or s == space.full:
            continue
        n = (s - 1) // space.num_slack + 1
        if mdp.row_batch[r] == n:
            reach = np.nonzero(mdp.probs[r] > 1e-12)[0]
            counts = {(t - 1) // space.num_slack + 1 for t in reach
                      if t not in (space.empty, space.full)}
            assert all(c % job == 0 and c <= n_max for c in counts), (n, counts)


def test_job_size_one_is_the_paper_model():
    a = build_mdp(MDPSpec(0.1, 4, 150.0, max_queue=6, intervals=10, max_batch=3), toy_model())
    b = build_mdp(MDPSpec(0.1, 4, 150.0, max_queue=6, intervals=10, max_batch=3, job_size=1),
                  toy_model())
    np.testing.assert_array_equal(a.probs, b.probs)
