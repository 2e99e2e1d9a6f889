"""The encoder replica's queue (asyncio, no Ray): images wait in deadline order; one background
task takes the step `policies.generation.stage_batch.encoder_step` decides (answer the lost ones,
encode the most urgent batch) and runs the batch on one worker thread. Batch times are measured
as they run (a moving estimate per batch size seeds the next decisions)."""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from policies.generation.stage_batch import QueuedImage, encoder_step

log = logging.getLogger(__name__)


class QueueFull(RuntimeError):
    pass


@dataclass(order=True)
class _Entry:
    key: tuple[float, int]
    image: QueuedImage = field(compare=False)
    pixels: Any = field(compare=False)
    waiter: asyncio.Future[Any] = field(compare=False)


class BatchTimes:
    """Expected encode time per batch size: measured (moving average), else linear from the
    nearest measured size."""

    def __init__(self, alpha: float = 0.2) -> None:
        self.alpha = alpha
        self.seconds: dict[int, float] = {}

    def observe(self, n: int, seconds: float) -> None:
        old = self.seconds.get(n)
        self.seconds[n] = seconds if old is None else (1 - self.alpha) * old + self.alpha * seconds

    def __call__(self, n: int) -> float:
        if n in self.seconds:
            return self.seconds[n]
        if not self.seconds:
            return 0.0
        near = min(self.seconds, key=lambda k: abs(k - n))
        return self.seconds[near] * n / near


class EncoderLoop:
    def __init__(self, encode: Callable[[list[Any]], Any], max_batch: int,
                 max_queued: int, clock: Callable[[], float] = time.time) -> None:
        self._encode = encode
        self.max_batch = max_batch
        self.max_queued = max_queued
        self.times = BatchTimes()
        self._clock = clock
        self._queue: list[_Entry] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="encoder")
        self._task: asyncio.Task[None] | None = None
        self.encoded = 0
        self.expired = 0

    @property
    def pending(self) -> int:
        return len(self._queue)

    def warm(self, sample: Any, sizes: tuple[int, ...] = (1, 2, 4, 8)) -> None:
        """Measure batch times before traffic (blocking; call from the replica's constructor)."""
        for n in sizes:
            if n <= self.max_batch:
                start = time.perf_counter()
                self._encode([sample] * n)
                self.times.observe(n, time.perf_counter() - start)

    async def submit(self, image_id: str, pixels: Any, deadline_s: float,
                     after_s: float = 0.0, fifo: bool = False) -> Any:
        """The image's embeddings, or None when its deadline was lost before it was encoded.
        `fifo`: queued in arrival order instead of deadline order (the ablation's baseline)."""
        if len(self._queue) >= self.max_queued:
            raise QueueFull(f"encoder queue full ({self.max_queued} images)")
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        seq = next(self._seq)
        entry = _Entry((0.0 if fifo else deadline_s, seq),
                       QueuedImage(image_id, deadline_s, after_s), pixels, fut)
        bisect.insort(self._queue, entry)
        self._wake.set()
        return await fut

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
            self._queue = [e for e in self._queue if not e.waiter.done()]  # cancelled callers
            step = encoder_step([e.image for e in self._queue], self._clock(), self.max_batch,
                                self.times)
            gone = set(step.expired) | set(step.batch)
            taken = {e.image.image_id: e for e in self._queue if e.image.image_id in gone}
            self._queue = [e for e in self._queue if e.image.image_id not in gone]
            for image_id in step.expired:
                self.expired += 1
                _answer(taken[image_id].waiter, None)
            if step.batch:
                await self._encode_batch(loop, [taken[i] for i in step.batch])

    async def _encode_batch(self, loop: asyncio.AbstractEventLoop, batch: list[_Entry]) -> None:
        start = time.perf_counter()
        try:
            out = await loop.run_in_executor(self._pool, self._encode, [e.pixels for e in batch])
        except Exception as exc:
            log.exception("encoding a batch of %d failed", len(batch))
            for e in batch:
                if not e.waiter.done():
                    e.waiter.set_exception(exc)
            return
        self.times.observe(len(batch), time.perf_counter() - start)
        self.encoded += len(batch)
        for e, emb in zip(batch, out, strict=True):
            _answer(e.waiter, emb)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._pool.shutdown(wait=False, cancel_futures=True)


def _answer(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)
