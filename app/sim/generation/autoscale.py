"""Autoscaling in the generation simulator with the pure policy the live Serve hooks run
(policies.autoscaling: `coordinate` for ModServe's encoder and LLM pools, `decide` for the
monolith's one pool), called every `period_s` (ModServe §4.2: "every five minutes to match the
autoscaling overhead") on the loads the stages' replicas report.

Loads, tokens/s over `window_s` (`policies.autoscaling.meter.RateMeter`), counted where the live
replicas count them (deployments/generation/encoder.py, llm.py): image tokens arriving at the
encoders; text and image prompt tokens arriving at the LLM stage (after encoding). Live, each
replica meters its own arrivals and the policy sums the reports; here each stage has one meter
(the same sum, but for a replica younger than a window, which reports over its own age).

Monolith (plain vLLM, ModServe §5.2: "similar SLO-driven autoscaling heuristics based on offline
model profiling"): one stage; its load is in prefill-equivalent prompt tokens: prompt tokens
(text; + image tokens for decoder-only, which its prefill processes) + images x
`image_token_equivalent` (LLM capacity / vision capacity in images/s of its own profile: one
image takes a replica as long as that many prompt tokens). So ceil(load / LLM capacity) =
ceil(prompt / C_llm + images / C_vision): a replica time-shares its vision tower and its LLM,
and each part's replicas add up. Same `ScalingSettings` knobs as ModServe's stages.

Forecast horizon: a replica ordered now serves `startup_s` later and the next decision comes a
period later, so each stage's `ScalingSettings.startup_s` is its startup + `period_s` (the
policy forecasts the load that far ahead and holds scale-downs as long after a scale-up).

SLO evidence (ModServe §4.3; `slo_attainment_floor`, 0 = off): the share since the last decision
of the work a stage got in time that it also finished in time. Encoders: an image request whose
images were encoded early enough to meet its deadline with its transfer and a prefill alone.
LLM: a request whose first token met its deadline, of those reaching the LLM early enough to
make it with a prefill alone. Monolith: every request's TTFT. (Live, only the encoders report
one, from the images their deadline-ordered loop drops.)

Budget: accelerators held by targets <= `max_accelerators`; the LLM's target is kept and the
encoders' cut to what is left (counted in `clamped`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import astuple, dataclass

from app.sim.generation.config import GenSimConfig
from app.sim.generation.requests import GenRequest
from app.sim.generation.sim import GenerationSim, GenSimResult
from app.sim.generation.workload import TraceArrays
from policies.autoscaling import (
    ENCODER,
    LLM,
    AppScalingSettings,
    ScalingDecision,
    ScalingSettings,
    ScalingState,
    StageLoads,
    StageView,
    coordinate,
    decide,
)
from policies.autoscaling.meter import RateMeter, ShareSinceLast
from policies.generation.stage_profile import StageProfiles
from policies.generation.token_routing import Architecture
from policies.generation.ttft_slo import TTFTSLOs

ENC_IMAGE, LLM_TEXT, LLM_IMAGE, LLM_IMAGES = ("encoder_image_tokens", "llm_text_tokens",
                                              "llm_image_tokens", "llm_images")
METERS = (ENC_IMAGE, LLM_TEXT, LLM_IMAGE, LLM_IMAGES)


@dataclass(frozen=True)
class PolicyTiming:
    """The policy's time constants, in the run's seconds (`compressed`: a k-times faster day)."""

    period_s: float = 300.0  # ModServe §4.2
    window_s: float = 300.0  # the replicas' rate window (the load since the last decision)
    scale_down_delay_s: float = 600.0
    trend_window_s: float = 600.0
    encoder_startup_s: float = 30.0
    llm_startup_s: float = 60.0  # an LLM replica (text instance) or a monolith replica

    def compressed(self, k: float) -> PolicyTiming:
        return PolicyTiming(*(v / k for v in astuple(self)))


@dataclass(frozen=True)
class Autoscaling:
    timing: PolicyTiming
    target_utilization: float = 0.8
    slo_attainment_floor: float = 0.0
    max_accelerators: int = 128
    min_replicas: int = 1


@dataclass(frozen=True)
class Capacities:
    """Per replica, within the SLO (policies.generation.stage_profile)."""

    encoder_tokens_per_s: float  # image tokens: an image instance, or the monolith's vision
    llm_tokens_per_s: float  # prompt tokens in the router's units (decode cost included)
    tokens_per_image: int

    @property
    def image_token_equivalent(self) -> float:
        """Prompt tokens costing a replica as long as one image's encode (monolith)."""
        return self.llm_tokens_per_s * self.tokens_per_image / self.encoder_tokens_per_s


def capacities(profiles: StageProfiles, slos: TTFTSLOs, tbt_slo_ms: float,
               decode_tokens_per_prompt_token: float, encoder_max_batch: int) -> Capacities:
    """The encoders (or vision tower) at the image-text SLO, the LLM at the tighter of the two
    classes' (it serves both)."""
    return Capacities(
        profiles.encoder.capacity_tokens_per_s(slos.slo_ms(1), max_batch_images=encoder_max_batch),
        profiles.llm.capacity_tokens_per_s(min(slos.by_class().values()), tbt_slo_ms,
                                           decode_tokens_per_prompt_token),
        profiles.encoder.tokens_per_image)


def stage_settings(capacity: float, auto: Autoscaling, startup_s: float,
                   max_replicas: int) -> ScalingSettings:
    t = auto.timing
    return ScalingSettings(capacity, auto.min_replicas, max(auto.min_replicas, max_replicas),
                           auto.target_utilization, t.scale_down_delay_s,
                           startup_s + t.period_s, t.trend_window_s, auto.slo_attainment_floor)


def app_settings(caps: Capacities, auto: Autoscaling, architecture: Architecture,
                 tp: dict[str, int]) -> AppScalingSettings:
    """ModServe's two stages (`tp`: accelerators per replica of each); the monolith uses
    `.llm` (its capacity in prefill-equivalent tokens is the LLM's)."""
    budget, t = auto.max_accelerators, auto.timing
    return AppScalingSettings(
        stage_settings(caps.encoder_tokens_per_s, auto, t.encoder_startup_s,
                       (budget - auto.min_replicas * tp.get(LLM, 1)) // tp.get(ENCODER, 1)),
        stage_settings(caps.llm_tokens_per_s, auto, t.llm_startup_s, budget // tp[LLM]),
        architecture)


class MeteredSim(GenerationSim):
    """The generation simulator with its stages' arrival meters and SLO evidence."""

    def __init__(self, workload: TraceArrays | Sequence[GenRequest], profiles: StageProfiles,
                 config: GenSimConfig, window_s: float) -> None:
        super().__init__(workload, profiles, config)
        self.tokens_per_image = profiles.encoder.tokens_per_image
        self.text = self.trace.text_tokens.tolist()
        self.meters = {name: RateMeter(window_s, 0.0) for name in METERS}
        self.deadline = self.llm.work.deadline_s
        self.in_time = {ENCODER: [0, 0], LLM: [0, 0]}  # stage -> [good, bad]
        self._alone_s: dict[int, float] = {}

    def _alone(self, i: int, transfer: bool = False) -> float:
        """A prefill of request i's prompt alone (and its images' transfer), seconds."""
        tokens = self.llm.work.prompt_tokens[i]
        t = self._alone_s.get(tokens)
        if t is None:
            t = self._alone_s[tokens] = self.llm.profile.prefill_time_ms(tokens) / 1000.0
        return t + transfer * self.images[i] * self.cfg.transfer_ms_per_image / 1000.0

    def _arrive(self, now_s: float, i: int) -> None:
        if self.encoder is not None and self.images[i]:
            self.meters[ENC_IMAGE].add(now_s, self.images[i] * self.tokens_per_image)
        super()._arrive(now_s, i)

    def _to_llm(self, now_s: float, i: int) -> None:
        m = self.meters
        m[LLM_TEXT].add(now_s, self.text[i])
        m[LLM_IMAGE].add(now_s, self.images[i] * self.tokens_per_image)
        m[LLM_IMAGES].add(now_s, self.images[i])
        super()._to_llm(now_s, i)

    def _encoded(self, i: int, now_s: float, ok: bool) -> None:
        self.in_time[ENCODER][now_s + self._alone(i, transfer=True) > self.deadline[i]] += 1
        super()._encoded(i, now_s, ok)

    def _first(self, i: int, now_s: float) -> None:
        if now_s <= self.deadline[i]:
            self.in_time[LLM][0] += 1
        elif self.encoder is None or self.llm_at[i] + self._alone(i) <= self.deadline[i]:
            self.in_time[LLM][1] += 1
        super()._first(i, now_s)


@dataclass(frozen=True)
class Tick:
    time_s: float
    target: dict[str, int]
    held: dict[str, int]  # replicas holding accelerators (starting, ready, draining)
    accelerators: int
    load_tokens_per_s: dict[str, float]  # the stage loads the policy was given
    reason: dict[str, str]


class Autoscaler:
    """`sim.every(period_s, Autoscaler(...))`: one decision per call, applied at once."""

    def __init__(self, settings: AppScalingSettings, caps: Capacities, auto: Autoscaling,
                 tp: dict[str, int], monolith: bool) -> None:
        self.settings, self.caps, self.auto, self.tp = settings, caps, auto, tp
        self.monolith = monolith
        self.states: dict[str, ScalingState] = {ENCODER: ScalingState(), LLM: ScalingState()}
        self.shares = {ENCODER: ShareSinceLast(), LLM: ShareSinceLast()}
        self.ticks: list[Tick] = []
        self.decision_ns: list[int] = []  # wall time of each policy call
        self.decision_cpu_ns: list[int] = []  # its thread's CPU time (no preemption)
        self.clamped = 0

    def loads(self, sim: MeteredSim, now_s: float) -> StageLoads:
        r = {name: m.rate(now_s) for name, m in sim.meters.items()}
        if not self.monolith:
            return StageLoads(r[ENC_IMAGE], r[LLM_TEXT], r[LLM_IMAGE])
        prompt = r[LLM_TEXT] + (r[LLM_IMAGE] if self.settings.architecture
                                is Architecture.DECODER_ONLY else 0.0)
        return StageLoads(0.0, prompt + r[LLM_IMAGES] * self.caps.image_token_equivalent, 0.0)

    def decide(self, sim: MeteredSim, now_s: float) -> dict[str, ScalingDecision]:
        loads = self.loads(sim, now_s)
        pools = sim.pools()
        slo = {s: self.shares[s].take(*sim.in_time[s]) for s in pools}
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        if self.monolith:  # loads.text_tokens_per_s: prefill-equivalent (module docstring)
            out = {LLM: decide(self.settings.llm, pools[LLM].target, loads.text_tokens_per_s,
                               now_s, self.states[LLM], slo[LLM])}
        else:
            views = {s: StageView(p.target, len(p.ready), self.states[s], slo[s])
                     for s, p in pools.items()}
            out = coordinate(self.settings, views, loads, now_s)
        self.decision_ns.append(time.perf_counter_ns() - t0)
        self.decision_cpu_ns.append(time.thread_time_ns() - c0)
        return out

    def within_budget(self, targets: dict[str, int], draining: dict[str, int]) -> dict[str, int]:
        """Targets whose accelerators, with those of the replicas still draining, fit the
        budget: every stage above its minimum cut in proportion (what is left over: the
        encoders first)."""
        tp, budget, low = self.tp, self.auto.max_accelerators, self.auto.min_replicas
        free = budget - sum(n * tp[s] for s, n in draining.items())
        used = sum(n * tp[s] for s, n in targets.items())
        if used <= free:
            return targets
        self.clamped += 1
        share = max(0.0, free - sum(low * tp[s] for s in targets)) / max(
            1, sum((n - low) * tp[s] for s, n in targets.items() if n > low))
        out = {s: n if n <= low else low + int((n - low) * share) for s, n in targets.items()}
        for s in sorted(out):  # ENCODER before LLM
            over = sum(n * tp[x] for x, n in out.items()) - free
            if over > 0:
                out[s] = max(low, out[s] - -(-over // tp[s]))
        return out

    def __call__(self, sim: GenerationSim, now_s: float) -> None:
        assert isinstance(sim, MeteredSim)
        decisions = self.decide(sim, now_s)
        pools = sim.pools()
        targets = self.within_budget({s: d.replicas for s, d in decisions.items()},
                                     {s: p.held - p.target for s, p in pools.items()})
        for stage, d in decisions.items():
            self.states[stage] = d.state
            if targets[stage] != pools[stage].target:
                sim.set_replicas(stage, targets[stage], now_s)
        held = {s: p.held for s, p in pools.items()}
        self.ticks.append(Tick(
            now_s, {s: p.target for s, p in pools.items()}, held,
            sum(n * self.tp[s] for s, n in held.items()),
            {s: d.load_tokens_per_s for s, d in decisions.items()},
            {s: d.reason.value for s, d in decisions.items()}))


def autoscaled(workload: TraceArrays | Sequence[GenRequest], profiles: StageProfiles,
               config: GenSimConfig, caps: Capacities, auto: Autoscaling,
               tp: dict[str, int]) -> tuple[GenSimResult, Autoscaler]:
    """Serve `workload` under `config` (its replica counts: the initial ones) with the stages
    autoscaled every `auto.timing.period_s`."""
    sim = MeteredSim(workload, profiles, config, auto.timing.window_s)
    settings = app_settings(caps, auto, profiles.llm.architecture, tp)
    scaler = Autoscaler(settings, caps, auto, tp, config.monolith)
    sim.every(auto.timing.period_s, scaler)
    return sim.run(), scaler
