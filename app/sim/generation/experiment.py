"""ModServe's static-allocation experiment (seed 001 §5.2, Figures 14 and 15) in the simulator.

Systems on 128 A100s: the monolith (32 replicas TP-4 behind a least-outstanding-requests load
balancer, FIFO, as plain vLLM) and three disaggregated ones of 20 text instances TP-4 + 48 image
instances TP-1 (§5.2): `decoupled` (round-robin routing, FIFO), `+scheduling` (TTFT-deadline
order in both pools), `modserve` (+ token routing in both pools: least pending image tokens, least
pending prompt tokens); and `modserve-sized`, modserve on the same accelerators split between the
pools as their stage profiles' capacities call for (`sized_split`, ModServe §4.2). The workload is the generator's steady Poisson traffic (workload.py) with
short prompts (§5.1: text from the ShareGPT-4o dataset; power-law shapes of §3.2 around a median
of `PROMPT_MEDIAN_TOKENS`), scaled in time to each load so that every load serves the same
requests. The TTFT SLOs are per request class (§5.1; policies.generation.ttft_slo): `slo_factor`
x the isolated TTFT on the monolith of a text-only request (text-only requests) and of a
one-image request (image-text requests), both with the median prompt; a load meets them when the
P99 TTFT of each class is within its class's SLO (`per_class_slo=False`: the one-image SLO for
every request, the first cut's reading).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from app.sim.generation.config import GenSimConfig, Order, Routing, ServePath, StageConfig
from app.sim.generation.metrics import GenSummary, summarize
from app.sim.generation.modserve_profiles import IMAGE_TP, MONOLITH_TP, TEXT_TP, modserve_profiles
from app.sim.generation.requests import GenRequest
from app.sim.generation.sim import simulate
from app.sim.generation.workload import PowerLawTokens, TraceArrays, generate_arrays, steady
from policies.generation.stage_profile import StageProfiles
from policies.generation.token_routing import PromptCost, RequestTokens
from policies.generation.ttft_slo import TTFTSLOs

SYSTEMS = ("monolith", "decoupled", "+scheduling", "modserve")
SIZED = "modserve-sized"  # modserve with the text:image split its stage profiles call for
PROMPT_MEDIAN_TOKENS = 100  # ShareGPT-4o-like questions (the Fig. 5 calibration's prompt too)
TEXT_ONLY_PROMPT = PowerLawTokens(alpha=2.9, median_tokens=PROMPT_MEDIAN_TOKENS, min_tokens=16,
                                  max_tokens=8192)
IMAGE_TEXT_PROMPT = PowerLawTokens(alpha=4.4, median_tokens=PROMPT_MEDIAN_TOKENS, min_tokens=16,
                                   max_tokens=4096)


@dataclass(frozen=True)
class Setup:
    """One model's experiment: its profiles, the allocation and the SLO."""

    model: str
    disaggregated: StageProfiles  # image instance TP-1 + text instance TP-4
    monolith: StageProfiles  # TP-4 replicas running both
    slo_factor: float
    ttft_slo_ms: float  # image-text requests' (and every request's without a text-only SLO)
    isolated_ttft_ms: float  # a one-image request's, on the monolith
    monolith_replicas: int = 32
    text_instances: int = 20
    image_instances: int = 48
    transfer_ms_per_image: float = 1.0  # §5.5: P99 5 ms per image request over InfiniBand
    warmup_share: float = 0.1  # of the requests, left out of the summary
    prompt_tokens_until_done: bool = False  # the LLM replicas' route-token count (llm.py)
    chunked_prefill: bool = True  # the LLM replicas' scheduler (llm.py; False: whole prompts)
    text_ttft_slo_ms: float | None = None  # text-only requests' (None: ttft_slo_ms)
    isolated_text_ttft_ms: float = math.nan  # a text-only request's, on the monolith

    @property
    def slos(self) -> TTFTSLOs:
        return TTFTSLOs(self.ttft_slo_ms, self.text_ttft_slo_ms)

    @property
    def accelerators(self) -> dict[str, int]:
        return {"monolith": self.monolith_replicas * MONOLITH_TP,
                "disaggregated": self.text_instances * TEXT_TP + self.image_instances * IMAGE_TP}


def _one_request_ttft_ms(profiles: StageProfiles, config: GenSimConfig, text_tokens: int,
                         images: int) -> float:
    result = simulate([GenRequest(0.0, text_tokens, images, 1)], profiles, config)
    return float(result.ttft_ms()[0])


def isolated_ttft_ms(profiles: StageProfiles, text_tokens: int, images: int) -> float:
    """TTFT of one request alone on one monolith replica."""
    return _one_request_ttft_ms(profiles, GenSimConfig(ServePath.MONOLITH,
                                                       StageConfig(1, MONOLITH_TP)),
                                text_tokens, images)


def alone_ttft_ms(setup: Setup, system: str, images: int,
                  text_tokens: int = PROMPT_MEDIAN_TOKENS) -> float:
    """TTFT of one request alone on `system` at the setup's allocation: what no load lowers."""
    profiles = setup.monolith if system == "monolith" else setup.disaggregated
    return _one_request_ttft_ms(profiles, system_config(setup, system, 0.0, 0), text_tokens,
                                images)


def make_setup(model: str, slo_factor: float, per_class_slo: bool = True,
               tiles: int | None = None, **efficiency: float) -> Setup:
    """`tiles`: image tiles per image (None: the model's; modserve_profiles)."""
    disaggregated, monolith = modserve_profiles(model, tiles, **efficiency)
    iso = isolated_ttft_ms(monolith, PROMPT_MEDIAN_TOKENS, 1)
    iso_text = isolated_ttft_ms(monolith, PROMPT_MEDIAN_TOKENS, 0)
    slos = TTFTSLOs.from_isolated(slo_factor, iso_text, iso)
    return Setup(model, disaggregated, monolith, slo_factor, slos.image_text_ms, iso,
                 text_ttft_slo_ms=slos.text_only_ms if per_class_slo else None,
                 isolated_text_ttft_ms=iso_text)


def system_config(setup: Setup, system: str, warmup_s: float, seed: int) -> GenSimConfig:
    if system == "monolith":
        return GenSimConfig(ServePath.MONOLITH, StageConfig(
            setup.monolith_replicas, MONOLITH_TP, Routing.LEAST_REQUESTS, Order.FIFO),
            ttft_slo_ms=setup.ttft_slo_ms, text_ttft_slo_ms=setup.text_ttft_slo_ms,
            chunked_prefill=setup.chunked_prefill, warmup_s=warmup_s, seed=seed)
    if system not in SYSTEMS + (SIZED,):
        raise ValueError(f"unknown system {system!r}; valid: {list(SYSTEMS + (SIZED,))}")
    order = Order.FIFO if system == "decoupled" else Order.DEADLINE
    routing = Routing.TOKENS if system in ("modserve", SIZED) else Routing.ROUND_ROBIN
    return GenSimConfig(
        ServePath.DISAGGREGATED, StageConfig(setup.text_instances, TEXT_TP, routing, order),
        StageConfig(setup.image_instances, IMAGE_TP, routing, order),
        ttft_slo_ms=setup.ttft_slo_ms, text_ttft_slo_ms=setup.text_ttft_slo_ms,
        transfer_ms_per_image=setup.transfer_ms_per_image,
        prompt_tokens_until_done=setup.prompt_tokens_until_done,
        chunked_prefill=setup.chunked_prefill, warmup_s=warmup_s, seed=seed)


def sized_split(setup: Setup, trace: TraceArrays) -> tuple[int, int]:
    """(text instances, image instances) on the disaggregated systems' accelerators, sized from
    the stage profiles' capacities at the SLOs (policies.generation.stage_profile: the arithmetic
    behind ModServe §4.2's ceil(load / capacity)) and the workload's token mix: the split whose
    weaker pool carries the most requests/s. The encoders at the image-text SLO, the LLM at the
    tighter of the two (it serves both classes). TBT SLO: slo_factor x the batch-1 TBT (§5.1)."""
    p = setup.disaggregated
    cost, tpi = PromptCost(p.llm.architecture), p.encoder.tokens_per_image
    prompt = float(np.mean([cost.route_tokens(RequestTokens(t, m, tpi)) for t, m in
                            zip(trace.text_tokens.tolist(), trace.num_images.tolist(),
                                strict=True)]))
    image = float(trace.num_images.mean()) * tpi
    encoder = p.encoder.capacity_tokens_per_s(setup.ttft_slo_ms)
    llm = p.llm.capacity_tokens_per_s(min(setup.slos.by_class().values()),
                                      setup.slo_factor * p.llm.tbt_time_ms(1),
                                      float(trace.output_tokens.mean()) / prompt)
    total = setup.accelerators["disaggregated"]

    def carried_rps(text: int) -> float:
        return min((total - TEXT_TP * text) // IMAGE_TP * encoder / max(image, 1e-9),
                   text * llm / prompt)

    text = max(range(1, (total - IMAGE_TP) // TEXT_TP + 1), key=carried_rps)
    return text, (total - TEXT_TP * text) // IMAGE_TP


def base_trace(requests: int, image_share: float, seed: int,
               images_exponent: float = 2.0) -> TraceArrays:
    """About `requests` requests at 1 request/s (scale with `at_rate`); images per image-text
    request ~ n^-images_exponent on 1..16 (workload.py)."""
    spec = replace(steady(1.0, image_share, float(requests)), images_exponent=images_exponent,
                   text_only_prompt=TEXT_ONLY_PROMPT, image_text_prompt=IMAGE_TEXT_PROMPT)
    return generate_arrays(spec, seed)


def at_rate(trace: TraceArrays, rate_rps: float) -> TraceArrays:
    """The same requests, arriving `rate_rps` times as fast as `trace` (made at 1 request/s)."""
    return TraceArrays(trace.arrival_s / rate_rps, trace.text_tokens, trace.num_images,
                       trace.output_tokens, trace.duration_s / rate_rps)


def run_point(setup: Setup, system: str, trace: TraceArrays, rate_rps: float,
              seed: int = 0) -> GenSummary:
    scaled = at_rate(trace, rate_rps)
    warmup_s = scaled.duration_s * setup.warmup_share
    profiles = setup.monolith if system == "monolith" else setup.disaggregated
    return summarize(simulate(scaled, profiles, system_config(setup, system, warmup_s, seed)))


def max_load(meets: Callable[[float], bool], passing: float, failing: float,
             steps: int = 6) -> float:
    """The largest rate meeting the SLO, by bisection between a passing and a failing rate
    (geometric midpoints; 0.0 when `passing` is 0 and nothing above it passes)."""
    lo, hi = passing, failing
    for _ in range(steps):
        mid = (lo * hi) ** 0.5 if lo > 0 else hi / 4
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return lo


ATTAINMENT_TARGET = 0.99  # ModServe §4.3: the pool managers' SLO-attainment threshold
CRITERIA: dict[str, Callable[[GenSummary], bool]] = {
    # each class's P99 TTFT within its class's SLO (the figure's reading of §5.1)
    "p99": lambda s: s.meets_slo,
    # at least 99% of all requests within their class's SLO (P99 of TTFT / own SLO <= 1)
    "attainment": lambda s: s.slo_attainment >= ATTAINMENT_TARGET,
}


@dataclass(frozen=True)
class SystemSweep:
    system: str
    split: tuple[int, int]  # (text instances, image instances); (0, 0) for the monolith
    points: tuple[tuple[float, GenSummary], ...]  # the load grid, up to the first far miss
    max_load_rps: dict[str, float]  # per criterion (CRITERIA)
    bounded: dict[str, bool]  # False: every rate of the grid met it (max_load_rps: a lower bound)


def sweep(setup: Setup, system: str, trace: TraceArrays, rates: tuple[float, ...],
          refine_steps: int = 5, stop_factor: float = 4.0, seed: int = 0) -> SystemSweep:
    """P99 TTFT over the ascending `rates` (stopping once every criterion failed and a class's
    P99 passed `stop_factor` x its SLO), then per criterion (CRITERIA) the maximum load meeting
    it, bisected between the last grid rate meeting it and the first one missing it."""
    if system == SIZED:
        text, image = sized_split(setup, trace)
        setup = replace(setup, text_instances=text, image_instances=image)
    points: list[tuple[float, GenSummary]] = []
    passing = dict.fromkeys(CRITERIA, 0.0)
    failing: dict[str, float] = {}
    for rate in rates:
        summary = run_point(setup, system, trace, rate, seed)
        points.append((rate, summary))
        for name, ok in CRITERIA.items():
            if name not in failing:
                if ok(summary):
                    passing[name] = rate
                else:
                    failing[name] = rate
        if len(failing) == len(CRITERIA) and summary.slo_ratio > stop_factor:
            break
    loads, bounded = {}, {}
    for name, ok in CRITERIA.items():
        bounded[name] = name in failing

        def meets(rate: float, ok: Callable[[GenSummary], bool] = ok) -> bool:
            return ok(run_point(setup, system, trace, rate, seed))

        loads[name] = passing[name] if name not in failing else max_load(
            meets, passing[name], failing[name], refine_steps)
    split = (0, 0) if system == "monolith" else (setup.text_instances, setup.image_instances)
    return SystemSweep(system, split, tuple(points), loads, bounded)
