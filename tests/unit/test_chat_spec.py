"""One chat traffic spec feeds the live workload and the generation simulator: the same spec
and seed give the same arrivals, image counts and prompt lengths on both sides."""

from __future__ import annotations

import pytest

from app.sim.traces.chat_spec import ChatTrafficSpec, ContextShape, chat_arrivals, sim_requests
from bench.workloads.chat import ExamplePool, make_workload

POOL = ExamplePool(tuple(f"w{i}" for i in range(40)), tuple((f"q{i}", f"a{i}") for i in range(30)))
SHAPE = ContextShape(context_len=2048, tokens_per_image=64, base_prompt_tokens=40, turn_tokens=12)


def test_live_and_simulated_requests_come_from_the_same_arrivals() -> None:
    spec = ChatTrafficSpec(rate_rps=10.0, duration_s=40.0, seed=3)
    live = make_workload(spec, SHAPE, POOL)
    sim = sim_requests(chat_arrivals(spec, SHAPE, len(POOL.digit_words), len(POOL.facts)), SHAPE)
    assert len(live) == len(sim) > 300
    assert [r.arrival_s for r in live] == [r.arrival_s for r in sim]
    assert [r.num_images for r in live] == [r.num_images for r in sim]
    assert [SHAPE.base_prompt_tokens + SHAPE.turn_tokens * len(r.history) for r in live] == [
        r.text_tokens for r in sim]
    assert all(r.output_tokens == spec.max_tokens for r in sim)
    # the mix the spec asks for: about half carry images, bursts present, heavy tail of images
    with_images = [r for r in live if r.num_images]
    assert 0.35 < len(with_images) / len(live) < 0.65
    assert any(r.in_burst for r in live) and max(r.num_images for r in live) > 3


def test_the_same_spec_gives_the_same_requests_and_another_seed_others() -> None:
    spec = ChatTrafficSpec(rate_rps=8.0, duration_s=20.0, seed=1)
    assert make_workload(spec, SHAPE, POOL) == make_workload(spec, SHAPE, POOL)
    other = ChatTrafficSpec(rate_rps=8.0, duration_s=20.0, seed=2)
    assert make_workload(other, SHAPE, POOL) != make_workload(spec, SHAPE, POOL)


def test_live_answers_are_the_pool_items_the_spec_drew() -> None:
    spec = ChatTrafficSpec(rate_rps=8.0, duration_s=20.0, seed=4)
    arrivals = chat_arrivals(spec, SHAPE, len(POOL.digit_words), len(POOL.facts))
    for a, r in zip(arrivals, make_workload(spec, SHAPE, POOL), strict=True):
        if a.fact_id is None:
            assert r.answer == " ".join(POOL.digit_words[i] for i in a.image_ids)
        else:
            assert (r.question, r.answer) == POOL.facts[a.fact_id] and r.task == "arithmetic"


def test_a_context_too_small_for_the_largest_request_is_refused() -> None:
    tight = ContextShape(context_len=300, tokens_per_image=64, base_prompt_tokens=40,
                         turn_tokens=12)
    with pytest.raises(ValueError, match="do not fit the context"):
        chat_arrivals(ChatTrafficSpec(5.0, 10.0), tight, 40, 30)
