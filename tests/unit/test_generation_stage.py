"""The generation stages' pure decisions and small pieces (no Ray, no engine)."""

from __future__ import annotations

import asyncio

import pytest

from deployments.engines.turns import Turns
from deployments.generation.encoder_loop import BatchTimes, EncoderLoop
from policies.generation.stage_batch import QueuedImage, encoder_step, priority_of, ttft_lost


def linear(n: int) -> float:
    return 0.010 * n


def test_encoder_step_takes_earliest_deadlines_and_expires_lost_ones() -> None:
    queue = [QueuedImage("late", 0.005), QueuedImage("a", 1.0), QueuedImage("b", 2.0),
             QueuedImage("c", 3.0)]
    step = encoder_step(queue, now_s=0.0, max_batch=2, encode_s=linear)
    assert step.expired == ("late",)
    assert step.batch == ("a", "b")


def test_encoder_step_keeps_the_heads_deadline() -> None:
    # the head has 35 ms: a batch of 3 (30 ms) fits, 4 (40 ms) would make it late
    queue = [QueuedImage(str(i), 0.035) for i in range(8)]
    assert len(encoder_step(queue, 0.0, 8, linear).batch) == 3
    # the time after encoding (prefill) counts too
    queue = [QueuedImage(str(i), 0.035, after_s=0.02) for i in range(8)]
    assert len(encoder_step(queue, 0.0, 8, linear).batch) == 1


def test_encoder_step_rejects_bad_batch() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        encoder_step([], 0.0, 0, linear)


def test_ttft_lost_and_priority_order() -> None:
    assert ttft_lost(10.0, 10.004, 0.005)
    assert not ttft_lost(10.0, 10.006, 0.005)
    assert priority_of(5.0, epoch_s=4.0) < priority_of(5.002, epoch_s=4.0)


def test_batch_times_measured_then_scaled() -> None:
    t = BatchTimes(alpha=0.5)
    assert t(4) == 0.0
    t.observe(2, 0.02)
    assert t(4) == pytest.approx(0.04)
    t.observe(2, 0.04)
    assert t(2) == pytest.approx(0.03)


def test_encoder_loop_batches_in_deadline_order_and_answers_lost_images() -> None:
    seen: list[list[str]] = []

    def encode(items: list[str]) -> list[str]:
        seen.append(list(items))
        return [f"emb:{x}" for x in items]

    async def main() -> list[object]:
        loop = EncoderLoop(encode, max_batch=2, max_queued=8, clock=lambda: 100.0)
        loop.times.observe(1, 0.01)
        loop.times.observe(2, 0.02)
        calls = [loop.submit("x", "x", 100.5), loop.submit("y", "y", 100.2),
                 loop.submit("z", "z", 100.3), loop.submit("lost", "lost", 99.0)]
        out = await asyncio.gather(*calls)
        loop.stop()
        return out

    out = asyncio.run(main())
    assert out == ["emb:x", "emb:y", "emb:z", None]
    assert seen[0] == ["y", "z"]  # the two earliest deadlines first


def test_turns_serve_lowest_priority_first() -> None:
    order: list[int] = []

    async def worker(turns: Turns, p: int) -> None:
        await turns.acquire(p)
        order.append(p)
        await asyncio.sleep(0)
        turns.release()

    async def main() -> None:
        turns = Turns()
        await turns.acquire(0)  # busy: the others queue
        tasks = [asyncio.create_task(worker(turns, p)) for p in (5, 1, 3)]
        await asyncio.sleep(0)
        turns.release()
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert order == [1, 3, 5]


def test_image_groups_split_in_order_at_most_one_per_replica() -> None:
    from deployments.generation.pipeline import image_groups

    assert image_groups(0, 2) == []
    for n in range(1, 10):
        for fan_out in (1, 2, 3, 8):
            groups = image_groups(n, fan_out)
            assert len(groups) == min(n, fan_out)
            assert [i for a, b in groups for i in range(a, b)] == list(range(n))  # in order
            sizes = [b - a for a, b in groups]
            assert max(sizes) - min(sizes) <= 1


def test_held_refs_keep_until_their_time_then_let_go() -> None:
    import time

    from deployments.generation.encoder import HeldRefs

    held = HeldRefs()
    held.hold("gone", time.time() - 1.0)
    assert len(held) == 1
    held.hold("kept", time.time() + 60.0)  # a new hold lets the expired one go
    held.hold("also kept", time.time() + 60.0)
    assert len(held) == 2 and [r for _, r in held._refs] == ["kept", "also kept"]
