"""Discrete-event simulation of the generation path (ModServe §4) on the one kernel (app/sim/kernel).

    disaggregated: arrival -> (images) encoder pool (encoder.py) -> all encoded
                   -> + transfer_ms_per_image x images -> LLM pool (llm.py) -> tokens
                   text-only requests skip the encoders
    monolith:      arrival -> LLM pool whose replicas also run the vision tower (llm.py)

TTFT = first token - arrival; TBT = (last token - first token) / (output tokens - 1); E2E = last
token - arrival. Each request's TTFT deadline is arrival + its class's SLO (`config.slos`,
policies.generation.ttft_slo: text-only or image-text); deadline ordering and `drop_lost` use it.
Deterministic: the kernel orders simultaneous events, routing ties rotate (policies.generation.token_routing
.TieOrder, seeded), and every draw (random routing) comes from one `random.Random(seed)`.

`set_replicas(stage, n, now_s)` and `every(period_s, fn)` are the hooks an autoscaler drives.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.generation.config import GenSimConfig, StageConfig
from app.sim.generation.encoder import EncoderStage
from app.sim.generation.llm import LLMStage, LLMWork
from app.sim.generation.pool import ReplicaPool
from app.sim.generation.requests import GenRequest
from app.sim.generation.workload import TraceArrays
from app.sim.kernel import Kernel
from policies.generation.stage_profile import StageProfiles
from policies.generation.token_routing import PromptCost, RequestTokens

ARRIVAL_PRIORITY = 2
TICK_PRIORITY = 3
UNFINISHED, OK, LOST = 0, 1, 2  # outcome codes


@dataclass(frozen=True, eq=False)
class GenSimResult:
    config: GenSimConfig
    arrival_s: NDArray[np.float64]
    encoded_s: NDArray[np.float64]  # all images encoded (NaN: none to encode, or monolith)
    llm_s: NDArray[np.float64]  # reached the LLM stage's router
    first_s: NDArray[np.float64]  # first token (NaN: none)
    finish_s: NDArray[np.float64]  # last token, or the deadline_exceeded answer
    outcome: NDArray[np.int8]  # UNFINISHED, OK, LOST
    num_images: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    accelerator_seconds: float
    end_s: float  # the last event
    replica_log: dict[str, list[tuple[float, int, int]]]  # stage -> (time, ready, held)
    images_encoded: int
    iterations: int

    def ttft_ms(self) -> NDArray[np.float64]:
        return (self.first_s - self.arrival_s) * 1000.0

    def e2e_ms(self) -> NDArray[np.float64]:
        return np.where(self.outcome == OK, (self.finish_s - self.arrival_s) * 1000.0, np.nan)

    def tbt_ms(self) -> NDArray[np.float64]:
        steps = self.output_tokens.astype(np.float64) - 1.0
        with np.errstate(invalid="ignore", divide="ignore"):
            tbt = (self.finish_s - self.first_s) * 1000.0 / steps
        return np.where((self.outcome == OK) & (steps > 0), tbt, np.nan)


def simulate(workload: TraceArrays | Sequence[GenRequest], profiles: StageProfiles,
             config: GenSimConfig) -> GenSimResult:
    """Serve `workload` with `profiles` (for the monolith: its replicas' vision tower as the
    encoder profile) under `config`; every request runs to its end."""
    return GenerationSim(workload, profiles, config).run()


class GenerationSim:
    def __init__(self, workload: TraceArrays | Sequence[GenRequest], profiles: StageProfiles,
                 config: GenSimConfig,
                 stretch: Callable[[str, float], float] | None = None) -> None:
        """`stretch(stage, now_s)`: how much longer than the profile a step of "llm" or
        "encoder" starting now takes (e.g. cores shared with the live path: live_path.py)."""
        trace = workload if isinstance(workload, TraceArrays) else \
            TraceArrays.from_requests(list(workload))
        self.cfg = cfg = config
        self.trace = trace
        self.kernel = Kernel()
        self.rng = random.Random(cfg.seed)
        n = len(trace)
        self.arrival = trace.arrival_s.tolist()
        self.images = trace.num_images.tolist()
        self.encoded: list[float] = [math.nan] * n
        self.llm_at: list[float] = [math.nan] * n
        self.first: list[float] = [math.nan] * n
        self.finish: list[float] = [math.nan] * n
        self.outcome = [UNFINISHED] * n
        slos = cfg.slos
        deadline = [slos.deadline_s(t, m) for t, m in zip(self.arrival, self.images, strict=True)]
        cost, tpi = PromptCost(profiles.llm.architecture), profiles.encoder.tokens_per_image
        prompt = [cost.route_tokens(RequestTokens(t, m, tpi))
                  for t, m in zip(trace.text_tokens.tolist(), self.images, strict=True)]
        work = LLMWork(deadline, prompt, self.images, trace.output_tokens.tolist())
        self.llm = LLMStage(cfg, profiles.llm, profiles.encoder if cfg.monolith else None,
                            self.kernel, self._pool, work, self._first, self._done, self._lost,
                            stretch)
        self.encoder: EncoderStage | None = None
        if not cfg.monolith:
            after = [profiles.llm.prefill_time_ms(p) / 1000.0 + m * cfg.transfer_ms_per_image
                     / 1000.0 for p, m in zip(prompt, self.images, strict=True)] \
                if cfg.drop_lost else [0.0] * n
            self.encoder = EncoderStage(cfg, profiles.encoder, self.kernel, self._pool,
                                        deadline, after, self._encoded, stretch)
        self.kernel.feed(self.arrival, ARRIVAL_PRIORITY, self._arrive)
        self._last_s = 0.0

    def _pool(self, name: str, stage: StageConfig, on_ready: Callable[[float], None],
              has_work: Callable[[int], bool]) -> ReplicaPool:
        return ReplicaPool(name, stage, self.kernel, self.rng, on_ready, has_work)

    def pools(self) -> dict[str, ReplicaPool]:
        out = {"llm": self.llm.pool}
        if self.encoder is not None:
            out["encoder"] = self.encoder.pool
        return out

    def set_replicas(self, stage: str, n: int, now_s: float) -> None:
        """The autoscaling hook: stage "encoder" or "llm" (the monolith has only "llm")."""
        pools = self.pools()
        if stage not in pools:
            raise ValueError(f"unknown stage {stage!r}; valid: {sorted(pools)}")
        pools[stage].set_replicas(n, now_s)

    def every(self, period_s: float, fn: Callable[[GenerationSim, float], Any],
              until_s: float | None = None) -> None:
        """Call fn(sim, now) every `period_s` from `period_s` until `until_s` (default: the
        workload's duration)."""
        if period_s <= 0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        end = self.trace.duration_s if until_s is None else until_s

        def tick(now_s: float, _: int) -> None:
            fn(self, now_s)
            if now_s + period_s <= end:
                self.kernel.at(now_s + period_s, TICK_PRIORITY, tick)

        if period_s <= end:
            self.kernel.at(period_s, TICK_PRIORITY, tick)

    # ---- the request path -----------------------------------------------------------------
    def _arrive(self, now_s: float, i: int) -> None:
        self._last_s = now_s
        if self.encoder is None or self.images[i] == 0:
            self._to_llm(now_s, i)
        else:
            self.encoder.submit(i, self.images[i], now_s)

    def _encoded(self, i: int, now_s: float, ok: bool) -> None:
        self.encoded[i] = now_s
        if not ok:
            self._lost(i, now_s)
            return
        delay_s = self.images[i] * self.cfg.transfer_ms_per_image / 1000.0
        if delay_s > 0:
            self.kernel.at(now_s + delay_s, ARRIVAL_PRIORITY, self._to_llm, i)
        else:
            self._to_llm(now_s, i)

    def _to_llm(self, now_s: float, i: int) -> None:
        self.llm_at[i] = now_s
        self.llm.submit(i, now_s)

    def _first(self, i: int, now_s: float) -> None:
        self.first[i] = now_s

    def _done(self, i: int, now_s: float) -> None:
        self.finish[i] = now_s
        self.outcome[i] = OK
        self._last_s = now_s

    def _lost(self, i: int, now_s: float) -> None:
        self.finish[i] = now_s
        self.outcome[i] = LOST

    def run(self) -> GenSimResult:
        self.kernel.run()
        end_s = max(self._last_s, self.trace.duration_s)
        pools = self.pools()
        f64 = np.float64
        return GenSimResult(
            self.cfg, np.asarray(self.arrival, f64), np.asarray(self.encoded, f64),
            np.asarray(self.llm_at, f64), np.asarray(self.first, f64),
            np.asarray(self.finish, f64), np.asarray(self.outcome, np.int8),
            np.asarray(self.images, np.int64), self.trace.output_tokens.astype(np.int64),
            sum(p.accelerator_seconds(end_s) for p in pools.values()), end_s,
            {name: list(p.log) for name, p in pools.items()},
            self.encoder.images_encoded if self.encoder is not None else 0, self.llm.iterations)
