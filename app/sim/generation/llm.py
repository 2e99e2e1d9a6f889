"""The LLM pool (ModServe's text instances), and the monolith: replicas with continuous batching.

Chunked prefill (`chunked_prefill`, vLLM V1's default scheduler): each iteration has a budget of
`max_prefill_tokens` tokens (vLLM's max_num_batched_tokens); the running sequences decode first
(one token each), then the prompt being chunked (it stays at the head), then waiting prompts
(earliest TTFT deadline first, or FIFO) fill what is left, the last one split where the budget
ends, while the running sequences, the scheduled prompts and the one being chunked stay within
`max_running`. A prompt has its first token at the end of the iteration of its last chunk.
Unchunked (the first model): waiting prompts are admitted whole while the admitted prompt tokens
stay within `max_prefill_tokens` (always at least one prompt). Either way an iteration takes
    prefill_time_ms(prompt tokens scheduled)          if it scheduled any
  + tbt_time_ms(running sequences)                    if any is decoding
  + encoder latency_ms(the new prompts' images)       on the monolith only (the vision tower
                                                      runs inside the engine's step, as vLLM's,
                                                      when a prompt is first scheduled)
A prompt's tokens are what its prefill processes and what the router counts (`PromptCost`): text
+ image tokens for a decoder-only model, text only for a cross-attention one. A prompt has its
first token at the end of its prefill's (last) iteration and one more at the end of each later
one until it has `output_tokens`; a replica's count of pending tokens (the router's) holds a request's
prompt tokens from routing until its first token, the prefill work queued ahead, as the live
replica's does (policies.generation.token_routing), and the request in flight until its last token
(`prompt_tokens_until_done`: the tokens too, the old count, for comparison).

With `drop_lost`, a request whose TTFT deadline is lost when it reaches its replica (less than
`min_prefill_ms` left) is answered deadline_exceeded at once, as the live LLM stage does.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app.sim.generation.config import GenSimConfig, Order
from app.sim.generation.pool import ReplicaPool
from app.sim.kernel import Kernel
from policies.generation.stage_batch import ttft_lost
from policies.generation.stage_profile import EncoderProfile, LLMProfile

ITERATION_DONE_PRIORITY = 0
STEP_PRIORITY = 4  # an idle replica's next step starts after every arrival of the same instant


@dataclass(frozen=True)
class LLMWork:
    """Per request: what the LLM stage needs to know (indexed by request)."""

    deadline_s: Sequence[float]
    prompt_tokens: Sequence[int]  # prefill tokens = the router's cost
    num_images: Sequence[int]
    output_tokens: Sequence[int]


@dataclass
class _Replica:
    waiting: list[tuple[float, int, int]] = field(default_factory=list)  # (key, seq, request)
    running: int = 0
    iteration: int = 0
    finish_at: dict[int, list[int]] = field(default_factory=dict)  # iteration -> finishing
    admitted: list[int] = field(default_factory=list)  # prompts whose prefill the iteration ends
    busy: bool = False
    chunked: int = -1  # the prompt being prefilled in chunks (-1: none)
    chunked_left: int = 0  # its prompt tokens not yet prefilled


class LLMStage:
    def __init__(self, cfg: GenSimConfig, profile: LLMProfile, vision: EncoderProfile | None,
                 kernel: Kernel, pool_factory: Callable[..., ReplicaPool], work: LLMWork,
                 on_first: Callable[[int, float], None], on_done: Callable[[int, float], None],
                 on_lost: Callable[[int, float], None],
                 stretch: Callable[[str, float], float] | None = None) -> None:
        """`vision`: the monolith's vision tower (None: the disaggregated LLM stage);
        `stretch(stage, now_s)`: how much longer than its profile an iteration starting now
        takes (shared cores, bench/experiments/fidelity/generation/live_path.py; None: never)."""
        self.cfg = cfg
        self.stretch = stretch
        self.profile = profile
        self.vision = vision
        self.kernel = kernel
        self.work = work
        self.on_first, self.on_done, self.on_lost = on_first, on_done, on_lost
        self.pool = pool_factory("llm", cfg.llm, self._route_backlog, self._has_work)
        self.replicas: list[_Replica] = []
        self.backlog: deque[int] = deque()
        self.deadline_order = cfg.llm.order is Order.DEADLINE
        self.iterations = 0
        self._seq = 0
        self._tbt_s = [0.0] + [profile.tbt_time_ms(b) / 1000.0
                               for b in range(1, cfg.max_running + 1)]
        self._vision_s: dict[int, float] = {}

    def submit(self, request: int, now_s: float) -> None:
        """The request (its images encoded, or bringing them on the monolith) reaches the
        stage's router."""
        if self.cfg.drop_lost and ttft_lost(now_s, self.work.deadline_s[request],
                                            self.cfg.min_prefill_ms / 1000.0):
            self.on_lost(request, now_s)
            return
        if self.backlog or not self.pool.ready:
            self.backlog.append(request)
            return
        k = self.pool.route()
        assert k is not None
        while len(self.replicas) <= k:
            self.replicas.append(_Replica())
        self.pool.hold(k, self.work.prompt_tokens[request])
        self._seq += 1
        key = self.work.deadline_s[request] if self.deadline_order else float(self._seq)
        rep = self.replicas[k]
        heapq.heappush(rep.waiting, (key, self._seq, request))
        if not rep.busy:
            rep.busy = True  # the step is due: what else arrives at this instant joins it
            self.kernel.at(now_s, STEP_PRIORITY, self._step, k)

    def _route_backlog(self, now_s: float) -> None:
        pending, self.backlog = self.backlog, deque()
        for request in pending:
            self.submit(request, now_s)

    def _has_work(self, k: int) -> bool:
        if k >= len(self.replicas):
            return False
        rep = self.replicas[k]
        return rep.busy or bool(rep.waiting) or rep.running > 0 or rep.chunked >= 0

    def _admit_chunked(self, rep: _Replica) -> tuple[list[int], int, int]:
        """vLLM V1: decodes first, the chunked prompt next, then waiting prompts within the
        budget, the last one split. Returns the prompts whose prefill ends, the prompt tokens
        scheduled and the images of the prompts scheduled for the first time."""
        done: list[int] = []
        tokens = images = 0
        budget = self.cfg.max_prefill_tokens - rep.running
        if rep.chunked >= 0 and budget > 0:
            take = min(rep.chunked_left, budget)
            tokens, budget, rep.chunked_left = take, budget - take, rep.chunked_left - take
            if rep.chunked_left == 0:
                done.append(rep.chunked)
                rep.chunked = -1
        work = self.work
        while (rep.waiting and budget > 0 and rep.chunked < 0
               and rep.running + len(done) < self.cfg.max_running):
            r = heapq.heappop(rep.waiting)[2]
            t = work.prompt_tokens[r]
            take = min(t, budget)
            tokens, budget = tokens + take, budget - take
            images += work.num_images[r]
            if take < t:
                rep.chunked, rep.chunked_left = r, t - take
            else:
                done.append(r)
        return done, tokens, images

    def _admit(self, rep: _Replica) -> tuple[list[int], int, int]:
        if self.cfg.chunked_prefill:
            return self._admit_chunked(rep)
        admitted: list[int] = []
        tokens = images = 0
        work = self.work
        while rep.waiting and rep.running + len(admitted) < self.cfg.max_running:
            r = rep.waiting[0][2]
            t = work.prompt_tokens[r]
            if admitted and tokens + t > self.cfg.max_prefill_tokens:
                break
            heapq.heappop(rep.waiting)
            admitted.append(r)
            tokens += t
            images += work.num_images[r]
        return admitted, tokens, images

    def _step(self, now_s: float, k: int) -> None:
        self._start(k, now_s)

    def _start(self, k: int, now_s: float) -> None:
        rep = self.replicas[k]
        admitted, tokens, images = self._admit(rep)
        if not admitted and not tokens and rep.running == 0:
            rep.busy = False
            self.pool.work_done(k, now_s)
            return
        duration_s = self._tbt_s[rep.running]
        if admitted or tokens:
            duration_s += self.profile.prefill_time_ms(tokens) / 1000.0
        if images and self.vision is not None:
            duration_s += self._vision_time_s(images)
        if self.stretch is not None:
            duration_s *= self.stretch("llm", now_s)
        rep.admitted = admitted
        rep.busy = True
        self.iterations += 1
        self.kernel.at(now_s + duration_s, ITERATION_DONE_PRIORITY, self._iteration_done, k)

    def _vision_time_s(self, images: int) -> float:
        t = self._vision_s.get(images)
        if t is None:
            assert self.vision is not None
            t = self._vision_s[images] = self.vision.latency_ms(images) / 1000.0
        return t

    def _iteration_done(self, now_s: float, k: int) -> None:
        rep = self.replicas[k]
        j = rep.iteration
        rep.iteration += 1
        for r in rep.finish_at.pop(j, ()):
            rep.running -= 1
            self._finish(k, r, now_s)
        admitted, rep.admitted = rep.admitted, []
        for r in admitted:
            self.on_first(r, now_s)
            if not self.cfg.prompt_tokens_until_done:  # the prefill work is done
                self.pool.settle(k, self.work.prompt_tokens[r])  # still in flight
            n = self.work.output_tokens[r]
            if n <= 1:
                self._finish(k, r, now_s)
            else:
                rep.finish_at.setdefault(j + n - 1, []).append(r)
                rep.running += 1
        self._start(k, now_s)

    def _finish(self, k: int, request: int, now_s: float) -> None:
        self.pool.release(k, self.work.prompt_tokens[request]
                          if self.cfg.prompt_tokens_until_done else 0)
        self.on_done(request, now_s)
