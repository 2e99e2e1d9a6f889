"""The live generation path around the simulator: what a request costs on this machine beyond
the stage profiles, as parameters measured on the live system, and the simulator run with them
("Fidelity"; python -m bench fidelity generation, docs/sim_generation.md).

The stage profiles time the encoder and the vLLM engine alone. A live request also pays its path:
the Serve proxy, the ingress (strict JSON, chat template, tokenizer, the PNG data URLs), a Serve
handle hop to each stage replica it visits (the monolith's: the LLM replica, whose engine front
end processes the images; the disaggregated path's: one per encoder group, the object-store pull
of the embeddings, then the LLM replica) and the stream back (SSE). `PathCosts` models it as

    path latency (ms) = fixed_ms + per_hop_ms x image hops + per_image_ms x images

measured at the lowest load only (`fit_path_costs`: the residual live TTFT - simulated TTFT of
each request, least absolute deviations, so a few outliers do not move it). `cpu_share` is the
CPU the path's processes use per unit of that latency (measured from their CPU time, not
fitted): each request brings cpu_share x its latency of CPU work to the machine's `host_cores`,
which `competitors` busy threads also want (vLLM's engine, other processes: measured in busy
cores), processor-shared (`processor_sharing`): with n requests' work present each gets
min(1, host_cores / (n + competitors)) of a core. The part of a request's path its CPU work
takes alone (its work / that rate with n = 1, at most its latency) stretches by its work's
sojourn over that; the rest (waiting: IPC, event loops) does not. So a request alone takes
its calibrated latency, and concurrent requests slow each other down. `host_cores` 0 means no
contention (every request's path is a pure delay).

`LiveGenerationSim` puts each request through that path before the stages (its TTFT deadline
still counts from its arrival); `live_requests` rebuilds the simulator's requests from the live
benchmark's (images, earlier turns, the engine's prompt and answer token counts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.generation.config import GenSimConfig
from app.sim.generation.requests import GenRequest
from app.sim.generation.sim import ARRIVAL_PRIORITY, GenerationSim, GenSimResult
from app.sim.generation.workload import TraceArrays
from bench.experiments.fidelity.generation.shared_cores import (
    Occupancy,
    StageContention,
    processor_sharing,
)
from policies.generation.image_split import image_groups
from policies.generation.stage_profile import StageProfiles


@dataclass(frozen=True)
class PromptShape:
    """Prompt tokens of a live benchmark request (the VLM's chat template; bench/
    gen_payloads.py `model_shape` counts the same with the tokenizer): a one-turn prompt, each
    earlier (question, answer) turn, each image (its image tokens and the template around it)."""

    base_tokens: int
    turn_tokens: int
    image_prompt_tokens: int
    image_tokens: int  # of those, the tokens the encoder makes (the stage profile's)

    def prompt_tokens(self, num_images: int, history_turns: int) -> int:
        return (self.base_tokens + self.turn_tokens * history_turns
                + self.image_prompt_tokens * num_images)


@dataclass(frozen=True)
class LiveRequest:
    """One request of a live run, as its per-request record has it."""

    arrival_s: float  # scheduled send time from the run's start
    num_images: int
    history_turns: int
    prompt_tokens: int | None = None  # the engine's count (usage), when it answered
    output_tokens: int | None = None  # generated tokens (usage), when it answered


def live_requests(rows: Sequence[LiveRequest], shape: PromptShape,
                  default_output_tokens: int = 2) -> list[GenRequest]:
    """The simulator's requests: text tokens = prompt tokens - the images' encoder tokens (the
    engine's count where the record has one, else `shape`'s), the answer's length where known."""
    out = []
    for r in rows:
        prompt = r.prompt_tokens if r.prompt_tokens is not None else \
            shape.prompt_tokens(r.num_images, r.history_turns)
        text = max(0, prompt - r.num_images * shape.image_tokens)
        out.append(GenRequest(r.arrival_s, text, r.num_images,
                              max(1, r.output_tokens or default_output_tokens)))
    return out


def image_hops(num_images: int, config: GenSimConfig) -> int:
    """Handle hops a request's images take: the monolith's one call with pixels, the
    disaggregated path's one per encoder group (at most one per encoder replica)."""
    if num_images == 0:
        return 0
    if config.monolith:
        return 1
    return len(image_groups(num_images, max(1, config.encoder.replicas)))


@dataclass(frozen=True)
class PathCosts:
    fixed_ms: float = 0.0
    per_hop_ms: float = 0.0
    per_image_ms: float = 0.0
    cpu_share: float = 1.0  # CPU seconds on the host cores per second of path latency
    host_cores: float = 0.0  # cores that CPU work shares; 0: no contention
    competitors: float = 0.0  # other threads always wanting those cores (busy cores' worth)
    engine_cores: float = 0.0  # of the competitors, vLLM's engine's
    path_threads: float = 0.0  # the processes the path's work runs in (0: one per request)
    stages_share: bool = False  # the stages' threads share the cores too (shared_cores.py)

    def __post_init__(self) -> None:
        if min(self.fixed_ms, self.per_hop_ms, self.per_image_ms, self.host_cores,
               self.competitors, self.engine_cores, self.path_threads) < 0 \
                or not 0.0 <= self.cpu_share < math.inf:
            raise ValueError(f"path costs and cpu_share must be finite and >= 0: {self}")

    def latency_ms(self, num_images: int, hops: int) -> float:
        return self.fixed_ms + self.per_hop_ms * hops + self.per_image_ms * num_images

    @property
    def alone_rate(self) -> float:
        """The share of a core one request's CPU work gets alone (beside the competitors)."""
        if self.host_cores <= 0:
            return 1.0
        return min(1.0, self.host_cores / (1.0 + self.competitors))

    def path_s(self, arrival_s: Sequence[float], latency_s: Sequence[float]) -> list[float]:
        """Each request's time from arrival to the stages (module docstring)."""
        return self.path_and_cpu_done(arrival_s, latency_s)[0]

    def path_and_cpu_done(self, arrival_s: Sequence[float], latency_s: Sequence[float]
                          ) -> tuple[list[float], list[float]]:
        """`path_s`, and when each request's CPU work is done (its arrival without any)."""
        cpu_s = [x * self.cpu_share for x in latency_s]
        if self.cpu_share <= 0:
            return list(latency_s), list(arrival_s)
        done = processor_sharing(arrival_s, cpu_s, self.host_cores, self.competitors,
                                 self.path_threads)
        out = []
        for d, a, x, c in zip(done, arrival_s, latency_s, cpu_s, strict=True):
            alone = c / self.alone_rate  # its CPU work's sojourn with no other request
            critical = min(x, alone)
            out.append(x - critical + critical * (float(d) - a) / alone if alone > 0 else x)
        return out, done.tolist()

    def stage_contention(self, arrival_s: Sequence[float], cpu_done_s: Sequence[float]
                         ) -> StageContention | None:
        """The stages' stretch (shared_cores.py) where they share the cores, else None."""
        if not self.stages_share or self.host_cores <= 0:
            return None
        return StageContention(self.host_cores, Occupancy.of(arrival_s, cpu_done_s),
                               max(0.0, self.competitors - self.engine_cores), self.engine_cores,
                               self.path_threads)


class LiveGenerationSim(GenerationSim):
    """The simulator with the live path in front of the stages (module docstring)."""

    def __init__(self, workload: TraceArrays | Sequence[GenRequest], profiles: StageProfiles,
                 config: GenSimConfig, costs: PathCosts, extra_ms: Sequence[float] | None = None,
                 **kwargs: Any) -> None:
        """`extra_ms`: per request, added to its path (e.g. `spread_draws`; never below 0)."""
        super().__init__(workload, profiles, config, **kwargs)  # cooperative (burst_replay.py)
        self.costs = costs
        latency_s = [costs.latency_ms(m, image_hops(m, config)) / 1000.0 for m in self.images]
        self.path_s, cpu_done = costs.path_and_cpu_done(self.arrival, latency_s)
        self.contention = costs.stage_contention(self.arrival, cpu_done)
        if self.contention is not None:
            self.llm.stretch = self.contention
            if self.encoder is not None:
                self.encoder.stretch = self.contention
        if extra_ms is not None:
            self.path_s = [max(0.0, p + x / 1000.0)
                           for p, x in zip(self.path_s, extra_ms, strict=True)]
        self._enter = super()._arrive

    def _arrive(self, now_s: float, i: int) -> None:
        if self.path_s[i] > 0:
            self.kernel.at(now_s + self.path_s[i], ARRIVAL_PRIORITY, self._enter, i)
        else:
            self._enter(now_s, i)


def simulate_live(workload: TraceArrays | Sequence[GenRequest], profiles: StageProfiles,
                  config: GenSimConfig, costs: PathCosts,
                  extra_ms: Sequence[float] | None = None) -> GenSimResult:
    return LiveGenerationSim(workload, profiles, config, costs, extra_ms).run()


def spread_draws(residual_ms: Sequence[float], n: int, seed: int = 0) -> list[float]:
    """n draws (with replacement, seeded) from the residuals the path model left at the
    calibration load (`fit_path_costs`' `residuals`): the path's own variability there."""
    pool = np.asarray(residual_ms, np.float64)
    if pool.size == 0:
        return [0.0] * n
    return [float(x) for x in np.random.default_rng(seed).choice(pool, n)]


def least_absolute(x: NDArray[np.float64], y: NDArray[np.float64],
                   iterations: int = 100) -> NDArray[np.float64]:
    """Coefficients b >= 0 minimising sum |y - x b| (iteratively reweighted least squares); a
    column whose coefficient comes out negative is dropped (its coefficient 0) and the rest
    refitted: a path cost is never negative."""
    keep = list(range(x.shape[1]))
    while True:
        beta = np.zeros(x.shape[1])
        if not keep:
            return beta
        xs = x[:, keep]
        w = np.ones(y.size)
        b: NDArray[np.float64] = np.zeros(len(keep))
        for _ in range(iterations):
            b = np.asarray(np.linalg.lstsq(xs * w[:, None], y * w, rcond=None)[0], np.float64)
            w = 1.0 / np.sqrt(np.maximum(np.abs(y - xs @ b), 1e-3))
        if (b >= 0).all():
            beta[keep] = b
            return beta
        keep = [c for c, v in zip(keep, b, strict=True) if v >= 0 or v != b.min()]


def fit_path_costs(live_ttft_ms: Sequence[float], sim_ttft_ms: Sequence[float],
                   num_images: Sequence[int], hops: Sequence[int]) -> PathCosts:
    """fixed / per hop / per image ms from requests served at one (the lowest) load: the live
    TTFT minus the simulator's without path costs, least absolute deviations. Requests
    without a first token (live or simulated) are left out."""
    live = np.asarray(live_ttft_ms, np.float64)
    sim = np.asarray(sim_ttft_ms, np.float64)
    ok = np.isfinite(live) & np.isfinite(sim)
    if ok.sum() < 3:
        raise ValueError(f"need >= 3 requests served live and simulated, got {int(ok.sum())}")
    x = np.stack([np.ones(live.size), np.asarray(hops, np.float64),
                  np.asarray(num_images, np.float64)], axis=1)[ok]
    fixed, hop, image = least_absolute(x, (live - sim)[ok])
    return PathCosts(float(fixed), float(hop), float(image))


def residuals(live_ttft_ms: Sequence[float], sim_ttft_ms: Sequence[float],
              num_images: Sequence[int], hops: Sequence[int], costs: PathCosts
              ) -> NDArray[np.float64]:
    """What the path model leaves unexplained per request served (live - sim - path ms)."""
    live = np.asarray(live_ttft_ms, np.float64)
    sim = np.asarray(sim_ttft_ms, np.float64)
    path = np.array([costs.latency_ms(m, h) for m, h in zip(num_images, hops, strict=True)])
    ok = np.isfinite(live) & np.isfinite(sim)
    return np.asarray((live - sim - path)[ok], np.float64)
