"""Toy stage profiles and serving configs for the generation simulator's hand-computed cases.

An image takes 10 ms to encode (linear in the batch); a prefill of n tokens takes
5 + 0.1 (n - 1) ms; a decode step of b sequences 2 + 0.25 (b - 1) ms; 100 tokens per image.
"""

from __future__ import annotations

from app.sim.generation.config import GenSimConfig, ServePath, StageConfig
from policies.generation.stage_profile import EncoderProfile, LLMProfile, StageProfiles
from policies.generation.token_routing import Architecture


def toy(arch: Architecture = Architecture.DECODER_ONLY) -> StageProfiles:
    return StageProfiles("toy", "test", EncoderProfile(100, {1: 10.0, 2: 20.0, 4: 40.0}),
                         LLMProfile(arch, {1: 5.0, 1001: 105.0}, {1: 2.0, 9: 4.0}), {})


def prefill(n: int) -> float:
    """The toy prefill of n tokens, ms."""
    return 5.0 + 0.1 * (n - 1)


def disagg(encoders: int = 1, llms: int = 1, **kw: object) -> GenSimConfig:
    return GenSimConfig(ServePath.DISAGGREGATED, StageConfig(llms), StageConfig(encoders),
                        **kw)  # type: ignore[arg-type]


def mono(replicas: int = 1, **kw: object) -> GenSimConfig:
    return GenSimConfig(ServePath.MONOLITH, StageConfig(replicas), **kw)  # type: ignore[arg-type]
