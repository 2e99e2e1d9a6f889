"""The stages scaled together (ModServe section 4.2's pool managers), pure arithmetic run by
Serve's application-level `autoscaling_policy` (deployments/autoscaling/) and by the simulator.

Loads, in tokens/s (`StageLoads`): image tokens arriving at the encoders; text prompt tokens
and image tokens arriving at the LLM stage. Each stage is sized by `policies.autoscaling.stage`
on its own tokens:
- encoders: image tokens;
- LLM: text tokens, plus image tokens for a decoder-only model (homogeneous self-attention); a
  cross-attention model's prefill barely grows with image tokens (ModServe Insight 7), so they
  do not count. The LLM's image tokens are counted at most at the rate the encoders that are
  running now can deliver (`image_tokens_deliverable`): images have to be encoded before they
  reach the LLM, so while an image burst waits on the encoders' scale-up the LLM does not scale
  on it; if the burst is gone by the time the encoders caught up, the LLM never scaled at all.
  An image-only burst (image tokens up, text flat) thus scales the encoders and, for
  cross-attention always and for decoder-only while the LLM's capacity covers the delivered
  image tokens, leaves the LLM where it is.
- the monolith (no encoder stage): every replica runs its own vision tower, so its image tokens
  count for either architecture, each at `monolith_image_token_cost` prompt tokens.

Initial sizes from history (`initial_replicas`, ModServe 4.2): encoders = median image QPS x
median encode latency per image (Little's law: images in service at once); LLM = the median
request rate's prompt tokens (text + images per request x tokens per image for decoder-only) /
the LLM replica's capacity.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policies.autoscaling.stage import ScalingDecision, ScalingSettings, ScalingState, decide
from policies.generation.token_routing import Architecture

ENCODER = "encoder"
LLM = "llm"
STAGES = (ENCODER, LLM)


@dataclass(frozen=True)
class StageLoads:
    image_tokens_per_s: float = 0.0  # arriving at the encoders
    text_tokens_per_s: float = 0.0  # text prompt tokens arriving at the LLM stage
    llm_image_tokens_per_s: float = 0.0  # image tokens arriving at the LLM stage


@dataclass(frozen=True)
class AppScalingSettings:
    encoder: ScalingSettings
    llm: ScalingSettings
    architecture: Architecture = Architecture.DECODER_ONLY
    # the monolith (no encoder stage): an image token's cost on its replica, in prompt tokens
    # (vision tower, plus the prefill for decoder-only); 1: as a prompt token
    monolith_image_token_cost: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "architecture", Architecture.parse(self.architecture))
        if self.monolith_image_token_cost < 0:
            raise ValueError(f"monolith_image_token_cost must be >= 0, got "
                             f"{self.monolith_image_token_cost}")

    def stage(self, name: str) -> ScalingSettings:
        if name not in STAGES:
            raise ValueError(f"unknown stage {name!r}; valid: {list(STAGES)}")
        return self.encoder if name == ENCODER else self.llm


def image_tokens_deliverable(loads: StageLoads, encoder_running: int,
                             settings: AppScalingSettings) -> float:
    """Image tokens/s the LLM can receive: what arrives at it, at most what the running
    encoders encode within their SLO."""
    ceiling = max(0, encoder_running) * settings.encoder.capacity_tokens_per_s
    return min(max(0.0, loads.llm_image_tokens_per_s), ceiling)


def llm_load_tokens_per_s(loads: StageLoads, encoder_running: int,
                          settings: AppScalingSettings) -> float:
    text = max(0.0, loads.text_tokens_per_s)
    if settings.architecture is Architecture.CROSS_ATTENTION:
        return text
    return text + image_tokens_deliverable(loads, encoder_running, settings)


@dataclass(frozen=True)
class StageView:
    """One stage as the app-level policy sees it."""

    target: int  # replicas asked for (starting ones included)
    running: int  # replicas serving now
    state: ScalingState = ScalingState()
    slo_attainment: float | None = None


def coordinate(settings: AppScalingSettings, stages: Mapping[str, StageView],
               loads: StageLoads, now_s: float) -> dict[str, ScalingDecision]:
    """Each stage's decision; `stages` has ENCODER (absent for the monolith) and LLM."""
    unknown = sorted(set(stages) - set(STAGES))
    if unknown or LLM not in stages:
        raise ValueError(f"stages must include {LLM!r} and only {list(STAGES)}; got "
                         f"{sorted(stages)}")
    out: dict[str, ScalingDecision] = {}
    enc = stages.get(ENCODER)
    if enc is not None:
        out[ENCODER] = decide(settings.encoder, enc.target, loads.image_tokens_per_s, now_s,
                              enc.state, enc.slo_attainment)
        llm_tokens = llm_load_tokens_per_s(loads, enc.running, settings)
    else:  # monolith: every replica runs the vision tower on its own images too
        llm_tokens = loads.text_tokens_per_s + (
            loads.llm_image_tokens_per_s * settings.monolith_image_token_cost)
    llm = stages[LLM]
    out[LLM] = decide(settings.llm, llm.target, llm_tokens, now_s, llm.state, llm.slo_attainment)
    return out


@dataclass(frozen=True)
class History:
    """Samples (one per window, e.g. per minute) of a past workload."""

    image_qps: Sequence[float]  # images/s arriving
    encode_latency_s: Sequence[float]  # per image, median of the window
    request_qps: Sequence[float]  # requests/s (text-only and image-text)
    images_per_request: Sequence[float]
    text_tokens_per_request: Sequence[float]


def _median(values: Sequence[float], what: str) -> float:
    if not values:
        raise ValueError(f"history has no {what} samples")
    return float(statistics.median(values))


def initial_replicas(history: History, settings: AppScalingSettings,
                     tokens_per_image: int) -> dict[str, int]:
    """Initial replicas per stage from history (module docstring), within each stage's bounds."""
    in_service = _median(history.image_qps, "image_qps") * _median(
        history.encode_latency_s, "encode_latency_s")
    encoders = math.ceil(in_service - 1e-9)
    per_request = _median(history.text_tokens_per_request, "text_tokens_per_request")
    if settings.architecture is Architecture.DECODER_ONLY:
        per_request += _median(history.images_per_request, "images_per_request") * tokens_per_image
    llm_tokens = _median(history.request_qps, "request_qps") * per_request
    llms = math.ceil(llm_tokens / settings.llm.capacity_tokens_per_s - 1e-9)

    def bounded(n: int, s: ScalingSettings) -> int:
        return min(s.max_replicas, max(s.min_replicas, n))

    return {ENCODER: bounded(encoders, settings.encoder), LLM: bounded(llms, settings.llm)}
