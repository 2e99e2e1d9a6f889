"""The encoder pool (ModServe's image instances): a request's images, split into at most one group
per ready replica (policies.generation.image_split, the live ingress's split), each group routed
on its own; every image queued on its own at its replica (it
batches with other requests' images, as the live encoder loop does); a replica runs batches of up
to `encoder_max_batch` images taking `EncoderProfile.latency_ms(batch)`.

Queue order: the earliest TTFT deadline first, or FIFO. With `drop_lost`, a deadline-ordered
replica takes each step as `policies.generation.stage_batch.encoder_step` decides (the live
`EncoderLoop`): images whose request can no longer make its deadline are answered without being
encoded, and the batch keeps the head's deadline. A group answers once all its images are done;
a request goes on once all its groups answered.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from app.sim.generation.config import GenSimConfig, Order
from app.sim.generation.pool import ReplicaPool
from app.sim.kernel import Kernel
from policies.generation.image_split import image_groups
from policies.generation.stage_batch import QueuedImage, encoder_step
from policies.generation.stage_profile import EncoderProfile

BATCH_DONE_PRIORITY = 0
STEP_PRIORITY = 4  # an idle replica's next batch starts after every arrival of the same instant


@dataclass
class _Group:
    request: int
    replica: int
    tokens: int
    left: int  # images not yet encoded or expired
    failed: bool = False


class _Queue:
    """One replica's waiting images: a heap on (deadline, seq) or a FIFO deque of group ids."""

    def __init__(self, deadline_order: bool) -> None:
        self.deadline_order = deadline_order
        self.heap: list[tuple[float, int, int]] = []
        self.fifo: deque[int] = deque()

    def __len__(self) -> int:
        return len(self.heap) if self.deadline_order else len(self.fifo)

    def push(self, deadline_s: float, seq: int, group: int) -> None:
        if self.deadline_order:
            heapq.heappush(self.heap, (deadline_s, seq, group))
        else:
            self.fifo.append(group)

    def pop(self, n: int) -> list[tuple[float, int, int]]:
        if self.deadline_order:
            return [heapq.heappop(self.heap) for _ in range(min(n, len(self.heap)))]
        return [(0.0, 0, self.fifo.popleft()) for _ in range(min(n, len(self.fifo)))]


class EncoderStage:
    def __init__(self, cfg: GenSimConfig, profile: EncoderProfile, kernel: Kernel,
                 pool_factory: Callable[..., ReplicaPool], deadline_s: list[float],
                 after_s: list[float], on_request: Callable[[int, float, bool], None],
                 stretch: Callable[[str, float], float] | None = None) -> None:
        """`on_request(request, now_s, ok)`: all of a request's images are answered;
        `stretch`: as the LLM stage's (llm.py)."""
        self.cfg = cfg
        self.stretch = stretch
        self.profile = profile
        self.kernel = kernel
        self.deadline_s = deadline_s
        self.after_s = after_s  # each request's expected time past the encoder (encoder_step)
        self.on_request = on_request
        self.pool = pool_factory("encoder", cfg.encoder, self._route_backlog, self._has_work)
        self.queues: list[_Queue] = []
        self.busy: list[bool] = []
        self.current: list[list[int]] = []  # each replica's batch in progress (group per image)
        self.groups: list[_Group] = []
        self.groups_left: dict[int, int] = {}  # request -> groups not yet answered
        self.request_failed: set[int] = set()
        self.backlog: deque[tuple[int, int]] = deque()  # (request, images) with no replica ready
        self.images_encoded = 0
        self._seq = 0
        self._batch_s = [profile.latency_ms(b) / 1000.0 for b in range(cfg.encoder_max_batch + 1)]

    def submit(self, request: int, images: int, now_s: float) -> None:
        if self.backlog or not self.pool.ready:
            self.backlog.append((request, images))
            return
        groups = image_groups(images, len(self.pool.ready))
        self.groups_left[request] = len(groups)
        for start, stop in groups:
            k = self.pool.route()
            assert k is not None
            self._enqueue(request, k, stop - start, now_s)

    def _enqueue(self, request: int, k: int, images: int, now_s: float) -> None:
        while len(self.queues) <= k:
            self.queues.append(_Queue(self.cfg.encoder.order is Order.DEADLINE))
            self.busy.append(False)
            self.current.append([])
        g = len(self.groups)
        tokens = images * self.profile.tokens_per_image  # policies.generation.token_routing's image cost
        self.groups.append(_Group(request, k, tokens, images))
        self.pool.hold(k, tokens)
        for _ in range(images):
            self._seq += 1
            self.queues[k].push(self.deadline_s[request], self._seq, g)
        if not self.busy[k]:
            self.busy[k] = True  # the batch is due: what else arrives at this instant joins it
            self.kernel.at(now_s, STEP_PRIORITY, self._step, k)

    def _route_backlog(self, now_s: float) -> None:
        pending, self.backlog = self.backlog, deque()
        for request, images in pending:
            self.submit(request, images, now_s)

    def _has_work(self, k: int) -> bool:
        return k < len(self.queues) and (self.busy[k] or len(self.queues[k]) > 0)

    def _step(self, now_s: float, k: int) -> None:
        self._start(k, now_s)

    def _start(self, k: int, now_s: float) -> None:
        queue = self.queues[k]
        while len(queue):
            taken = queue.pop(self.cfg.encoder_max_batch)
            batch = [g for _, _, g in taken]
            if self.cfg.drop_lost and queue.deadline_order:
                batch = self._lost_step(k, taken, now_s)
                if not batch:
                    continue
            self.busy[k] = True
            self.current[k] = batch
            took = self._batch_s[len(batch)]
            if self.stretch is not None:
                took *= self.stretch("encoder", now_s)
            self.kernel.at(now_s + took, BATCH_DONE_PRIORITY, self._batch_done, k)
            return
        self.busy[k] = False
        self.pool.work_done(k, now_s)

    def _lost_step(self, k: int, taken: list[tuple[float, int, int]], now_s: float) -> list[int]:
        """encoder_step over the queue's head: answer the lost images, return the batch, put the
        live images the batch left back."""
        items = [QueuedImage(str(i), d, self.after_s[self.groups[g].request])
                 for i, (d, _, g) in enumerate(taken)]
        step = encoder_step(items, now_s, self.cfg.encoder_max_batch,
                            lambda n: self._batch_s[min(int(n), self.cfg.encoder_max_batch)])
        for i in map(int, step.expired):
            self._image_done(taken[i][2], now_s, ok=False)
        chosen = {int(i) for i in step.batch}
        expired = {int(i) for i in step.expired}
        for i, (d, seq, g) in enumerate(taken):
            if i not in chosen and i not in expired:
                self.queues[k].push(d, seq, g)
        return [taken[i][2] for i in sorted(chosen)]

    def _batch_done(self, now_s: float, k: int) -> None:
        batch, self.current[k] = self.current[k], []
        self.images_encoded += len(batch)
        for g in batch:
            self._image_done(g, now_s, ok=True)
        self._start(k, now_s)

    def _image_done(self, g: int, now_s: float, ok: bool) -> None:
        group = self.groups[g]
        group.left -= 1
        group.failed |= not ok
        if group.left:
            return
        self.pool.release(group.replica, group.tokens)
        r = group.request
        if group.failed:
            self.request_failed.add(r)
        self.groups_left[r] -= 1
        if self.groups_left[r] == 0:
            del self.groups_left[r]
            self.on_request(r, now_s, r not in self.request_failed)
