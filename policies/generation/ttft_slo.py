"""TTFT SLOs per request class (ModServe section 5.1: "the TTFT/TBT during the isolated run of a
single text-only request and text-image request (with one image) on the monolith baseline",
scaled by an SLO factor): a text-only request's deadline comes from the text-only SLO, a request
with images from the image-text one. The two differ (a one-image TTFT includes the encode and
the image tokens' prefill), so deadline ordering (policies.generation.stage_batch) serves a
short text-only request ahead of an image request that arrived a little earlier, as ModServe's
scheduling does (section 4.3: "prioritize shorter requests ... with tight SLOs").

A load meets the SLOs when the P99 TTFT of each class is within that class's SLO
(`meets`); a class with no requests does not count.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

TEXT_ONLY = "text_only"
IMAGE_TEXT = "image_text"
CLASSES = (TEXT_ONLY, IMAGE_TEXT)


def request_class(num_images: int) -> str:
    return IMAGE_TEXT if num_images > 0 else TEXT_ONLY


@dataclass(frozen=True)
class TTFTSLOs:
    image_text_ms: float
    text_only_ms: float | None = None  # None: the image-text SLO for every request

    def __post_init__(self) -> None:
        for name in ("image_text_ms", "text_only_ms"):
            v = getattr(self, name)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be finite and > 0, got {v}")

    @classmethod
    def from_isolated(cls, factor: float, text_only_ttft_ms: float,
                      one_image_ttft_ms: float) -> TTFTSLOs:
        """ModServe §5.1: `factor` x each class's isolated TTFT on the monolith."""
        if not factor > 0:
            raise ValueError(f"SLO factor must be > 0, got {factor}")
        return cls(factor * one_image_ttft_ms, factor * text_only_ttft_ms)

    @property
    def per_class(self) -> bool:
        return self.text_only_ms is not None

    def slo_ms(self, num_images: int) -> float:
        if num_images > 0 or self.text_only_ms is None:
            return self.image_text_ms
        return self.text_only_ms

    def by_class(self) -> dict[str, float]:
        return {TEXT_ONLY: self.slo_ms(0), IMAGE_TEXT: self.slo_ms(1)}

    def deadline_s(self, arrival_s: float, num_images: int) -> float:
        return arrival_s + self.slo_ms(num_images) / 1000.0

    def meets(self, p99_ms_by_class: Mapping[str, float]) -> bool:
        """Every class's P99 TTFT within its SLO (NaN: no requests of that class, ignored)."""
        slos = self.by_class()
        return all(not p99 > slos[c] for c, p99 in p99_ms_by_class.items()
                   if not math.isnan(p99))
