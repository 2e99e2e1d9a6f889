"""A request's sampling (deployments/engines/sampling.py) and the transformers engine's token
choice for it (deployments/engines/choose_token.py)."""

from __future__ import annotations

import pytest
import torch

from deployments.engines.choose_token import choose_token, generator_for
from deployments.engines.sampling import Sampling, cut_at_stop

LOGITS = torch.tensor([0.0, 3.0, 2.9, -1.0, 1.0])


@pytest.mark.parametrize("fields, words", [
    ({"temperature": 2.1}, "temperature"), ({"top_p": 0.0}, "top_p"), ({"top_k": -1}, "top_k"),
    ({"presence_penalty": 2.5}, "presence_penalty"), ({"stop": ("a",) * 5}, "at most 4"),
    ({"stop": ("",)}, "1..256"),
])
def test_out_of_range_values_are_refused(fields: dict, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Sampling(**fields)


def test_greedy_takes_the_most_likely_token_and_needs_no_generator() -> None:
    s = Sampling(seed=5, top_p=0.1)
    assert s.greedy and generator_for(s) is None
    assert choose_token(LOGITS, s, [], None) == 1


def test_penalties_lower_the_tokens_already_generated() -> None:
    # token 1 generated twice: 3.0 - 0.5 - 2 x 0.1 = 2.3 < 2.9 -> token 2 is now the greedy one
    s = Sampling(presence_penalty=0.5, frequency_penalty=0.1)
    assert choose_token(LOGITS, s, [1, 1], None) == 2
    assert choose_token(LOGITS, Sampling(), [1, 1], None) == 1


def test_the_same_seed_draws_the_same_tokens() -> None:
    s = Sampling(temperature=1.5, seed=11)
    g1, g2 = generator_for(s), generator_for(s)
    first = [choose_token(LOGITS, s, [], g1) for _ in range(30)]
    assert first == [choose_token(LOGITS, s, [], g2) for _ in range(30)]
    assert len(set(first)) > 1  # it does sample


def test_top_k_and_top_p_cut_the_unlikely_tokens() -> None:
    k2 = Sampling(temperature=2.0, top_k=2, seed=0)
    g = generator_for(k2)
    assert {choose_token(LOGITS, k2, [], g) for _ in range(200)} == {1, 2}
    # the two likeliest hold ~0.46 + ~0.42 of the mass at T=1: top_p 0.5 keeps both
    p = Sampling(temperature=1.0, top_p=0.5, seed=0)
    g = generator_for(p)
    assert {choose_token(LOGITS, p, [], g) for _ in range(200)} == {1, 2}
    p1 = Sampling(temperature=1.0, top_p=0.3, seed=0)  # the likeliest alone reaches 0.3
    g = generator_for(p1)
    assert {choose_token(LOGITS, p1, [], g) for _ in range(50)} == {1}


def test_stop_sequences_cut_at_the_first_found_and_hold_back_a_split_one() -> None:
    assert cut_at_stop("12 + 3 = 15\nnext", ("\n", "=")) == 7
    assert cut_at_stop("no stop here", ("\n",)) is None
    assert Sampling(stop=("END", "\n")).held_back_chars() == 2
    assert Sampling().held_back_chars() == 0
