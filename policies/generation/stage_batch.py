"""An encoder replica's next step over its deadline-ordered queue of images.

Images whose request can no longer meet its TTFT deadline (now + one batch-1 encode + the
request's remaining work past the encoder is after the deadline) are answered
`deadline_exceeded` without being encoded; of the rest, the earliest deadlines form the next
batch, up to `max_batch` images and as many as keep the head's deadline (the encode time of the
batch grows with its size, so a big batch must not make the most urgent image late).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class QueuedImage:
    image_id: str
    deadline_s: float  # the request's TTFT deadline, wall clock
    after_s: float = 0.0  # the request's expected time after its images are encoded (prefill)


@dataclass(frozen=True)
class EncoderStep:
    expired: tuple[str, ...]
    batch: tuple[str, ...]


def encoder_step(queue: Sequence[QueuedImage], now_s: float, max_batch: int,
                 encode_s: Callable[[int], float]) -> EncoderStep:
    """`queue` in deadline order; `encode_s(n)`: expected time to encode a batch of n images."""
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    one = encode_s(1)
    expired = tuple(q.image_id for q in queue if now_s + one + q.after_s > q.deadline_s)
    live = [q for q in queue if now_s + one + q.after_s <= q.deadline_s]
    if not live:
        return EncoderStep(expired, ())
    head = live[0]
    n = 1
    while n < min(max_batch, len(live)) and \
            now_s + encode_s(n + 1) + head.after_s <= head.deadline_s:
        n += 1
    return EncoderStep(expired, tuple(q.image_id for q in live[:n]))


def ttft_lost(now_s: float, deadline_s: float, min_prefill_s: float) -> bool:
    """Whether a request can no longer produce its first token by its TTFT deadline."""
    return now_s + min_prefill_s > deadline_s


def priority_of(deadline_s: float, epoch_s: float = 0.0, resolution_s: float = 0.001) -> int:
    """The engine priority of a request (lower runs first): its deadline in `resolution_s`
    units since `epoch_s`, so the LLM stage serves the earliest deadline first."""
    return int((deadline_s - epoch_s) / resolution_s)
