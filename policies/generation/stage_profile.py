"""Stage profiles of a generation model (ModServe section 4.1), plain data: what one encoder
replica and one LLM replica do per unit of work, and the capacity (tokens/s) each sustains
within a latency SLO. Measured offline on this machine by `adaptserve profile --stages`
(profiling/stages.py), or built from published numbers for the simulator's ModServe-scale runs
(app/sim/generation/); the autoscaling policies (policies/autoscaling/) take the capacities.

Encoder: latency of a batch of b images (each `tokens_per_image` tokens). Its image-token
capacity at a latency SLO is the best throughput b * tokens_per_image / latency(b) over the
batches whose latency fits `latency_share` of the SLO (the rest is left for queueing).

LLM: prefill time per prompt length (tokens in one prefill) and time between tokens per decode
batch. Its prompt-token capacity at a TTFT/TBT SLO: a prompt token costs its share of a prefill
(the longest profiled prefill that fits `latency_share` of the TTFT SLO, time / tokens) plus the
decode it brings, `decode_tokens_per_prompt_token` output tokens, each costing TBT(B) / B at the
largest decode batch B whose TBT fits the TBT SLO; capacity = 1 / that cost.

Latencies between profiled points are interpolated linearly (and extrapolated from the last two
points beyond them): encoder and prefill time are close to linear in work (ModServe Insight 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies.generation.token_routing import Architecture

FORMAT_VERSION = 1


def _points(table: Mapping[int, float], what: str) -> tuple[tuple[int, float], ...]:
    pts = tuple(sorted((int(k), float(v)) for k, v in table.items()))
    if not pts:
        raise ValueError(f"{what}: no profiled points")
    if any(k < 1 or v <= 0 or not math.isfinite(v) for k, v in pts):
        raise ValueError(f"{what}: sizes must be >= 1 and latencies finite and > 0: {pts}")
    return pts


def interpolate(points: tuple[tuple[int, float], ...], x: float) -> float:
    """Piecewise-linear through `points` (sorted by size); below the first point its latency
    (small work is no faster than the smallest profiled), beyond the last the last segment's
    slope (a single point: proportional), never decreasing."""
    points = _running_max(points)
    k0, v0 = points[0]
    if x <= k0:
        return v0
    if len(points) == 1:
        return v0 * x / k0
    for (ka, va), (kb, vb) in zip(points, points[1:], strict=False):
        if x <= kb:
            return va + (vb - va) * (x - ka) / (kb - ka)
    (ka, va), (kb, vb) = points[-2], points[-1]
    return max(vb, vb + (vb - va) * (x - kb) / (kb - ka))


def _running_max(points: tuple[tuple[int, float], ...]) -> tuple[tuple[int, float], ...]:
    """Each latency at least the one before it: more work never takes less time (a noisy
    measurement that dips is read as flat)."""
    out, top = [], 0.0
    for k, v in points:
        top = max(top, v)
        out.append((k, top))
    return tuple(out)


def _check_slo(what: str, slo_ms: float, latency_share: float) -> None:
    if not slo_ms > 0:
        raise ValueError(f"{what} must be > 0 ms, got {slo_ms}")
    if not 0 < latency_share <= 1:
        raise ValueError(f"latency_share must be in (0, 1], got {latency_share}")


@dataclass(frozen=True)
class EncoderProfile:
    tokens_per_image: int
    batch_latency_ms: Mapping[int, float]  # images per batch -> latency of the batch (p50)

    def __post_init__(self) -> None:
        if self.tokens_per_image < 1:
            raise ValueError(f"tokens_per_image must be >= 1, got {self.tokens_per_image}")
        object.__setattr__(self, "batch_latency_ms",
                           dict(_points(self.batch_latency_ms, "encoder batch_latency_ms")))

    def latency_ms(self, images: float) -> float:
        return interpolate(tuple(self.batch_latency_ms.items()), images)

    def capacity_tokens_per_s(self, slo_ms: float, latency_share: float = 0.5,
                              max_batch_images: int | None = None) -> float:
        """Image tokens/s one replica sustains with each batch within latency_share * slo_ms
        and at most `max_batch_images` (the replica's batch limit) images (at least the smallest
        profiled batch: a replica always makes progress)."""
        _check_slo("slo_ms", slo_ms, latency_share)
        budget = slo_ms * latency_share
        limit = max_batch_images if max_batch_images is not None else max(self.batch_latency_ms)
        rates = [b * self.tokens_per_image * 1000.0 / ms
                 for b, ms in self.batch_latency_ms.items() if ms <= budget and b <= limit]
        if not rates:
            b, ms = next(iter(self.batch_latency_ms.items()))
            rates = [b * self.tokens_per_image * 1000.0 / ms]
        return max(rates)


@dataclass(frozen=True)
class LLMProfile:
    architecture: Architecture
    prefill_ms: Mapping[int, float]  # prompt tokens in one prefill -> its time (p50)
    tbt_ms: Mapping[int, float]  # running sequences in the decode batch -> time between tokens

    def __post_init__(self) -> None:
        object.__setattr__(self, "architecture", Architecture.parse(self.architecture))
        object.__setattr__(self, "prefill_ms", dict(_points(self.prefill_ms, "prefill_ms")))
        object.__setattr__(self, "tbt_ms", dict(_points(self.tbt_ms, "tbt_ms")))

    def prefill_time_ms(self, tokens: float) -> float:
        return interpolate(tuple(self.prefill_ms.items()), tokens)

    def tbt_time_ms(self, batch: float) -> float:
        return interpolate(tuple(self.tbt_ms.items()), batch)

    def capacity_tokens_per_s(self, ttft_slo_ms: float, tbt_slo_ms: float,
                              decode_tokens_per_prompt_token: float = 0.0,
                              latency_share: float = 0.5) -> float:
        """Prompt tokens/s (the router's units: text + image for decoder-only, text only for
        cross-attention) one replica sustains within the SLOs (module docstring)."""
        _check_slo("ttft_slo_ms", ttft_slo_ms, latency_share)
        _check_slo("tbt_slo_ms", tbt_slo_ms, latency_share)
        budget = ttft_slo_ms * latency_share
        fits = [(n, ms) for n, ms in self.prefill_ms.items() if ms <= budget]
        n, ms = max(fits) if fits else next(iter(self.prefill_ms.items()))
        per_prompt_ms = ms / n
        batches = [b for b, t in self.tbt_ms.items() if t <= tbt_slo_ms] or [min(self.tbt_ms)]
        b = max(batches)
        per_decode_ms = self.tbt_ms[b] / b
        cost_ms = per_prompt_ms + max(0.0, decode_tokens_per_prompt_token) * per_decode_ms
        return 1000.0 / cost_ms


@dataclass(frozen=True)
class StageProfiles:
    """One model's stage profiles on one kind of hardware."""

    model: str
    hardware: str
    encoder: EncoderProfile
    llm: LLMProfile
    metadata: Mapping[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"format_version": FORMAT_VERSION, "model": self.model, "hardware": self.hardware,
                "encoder": {"tokens_per_image": self.encoder.tokens_per_image,
                            "batch_latency_ms": _keyed(self.encoder.batch_latency_ms)},
                "llm": {"architecture": self.llm.architecture.value,
                        "prefill_ms": _keyed(self.llm.prefill_ms),
                        "tbt_ms": _keyed(self.llm.tbt_ms)},
                "metadata": dict(self.metadata)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StageProfiles:
        if not isinstance(data, Mapping):
            raise ValueError(f"a stage profile is a JSON object, got {type(data).__name__}")
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"stage profile format_version {version!r}; this code reads "
                             f"{FORMAT_VERSION} (re-run `adaptserve profile --stages`)")
        try:
            enc, llm = data["encoder"], data["llm"]
            return cls(str(data["model"]), str(data["hardware"]),
                       EncoderProfile(int(enc["tokens_per_image"]),
                                      _unkeyed(enc["batch_latency_ms"])),
                       LLMProfile(Architecture.parse(llm["architecture"]),
                                  _unkeyed(llm["prefill_ms"]), _unkeyed(llm["tbt_ms"])),
                       dict(data.get("metadata", {})))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a stage profile: {type(exc).__name__} {exc}") from None


def _keyed(table: Mapping[int, float]) -> dict[str, float]:
    return {str(k): float(v) for k, v in sorted(table.items())}


def _unkeyed(table: Mapping[str, Any]) -> dict[int, float]:
    return {int(k): float(v) for k, v in table.items()}
