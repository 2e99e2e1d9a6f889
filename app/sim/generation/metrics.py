"""A generation run's summary: TTFT, TBT and E2E percentiles, SLO attainment, accelerators.

Counted requests are those arriving at or after `warmup_s`. TTFT percentiles are over every
counted request, a request without a first token (lost, or unfinished) counting as infinitely
late, so "P99 TTFT <= SLO" means at least 99% of the requests had their first token within the
SLO. Per class (text-only, image-text; policies.generation.ttft_slo) too: `meets_slo` is the P99
TTFT of each class within that class's SLO, and SLO attainment counts each request against its
class's SLO. TBT and E2E percentiles are over the requests served. Percentiles are the inverted-CDF kind
(an observed value, never an interpolation), so an infinite one stays infinite.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.generation.sim import LOST, OK, GenSimResult
from policies.generation.ttft_slo import IMAGE_TEXT, TEXT_ONLY


def percentile(values: NDArray[np.float64], q: float) -> float:
    """The q-th percentile (0..100) of `values` (NaN: none)."""
    if values.size == 0:
        return float("nan")
    return float(np.quantile(values, q / 100.0, method="inverted_cdf"))


@dataclass(frozen=True)
class GenSummary:
    requests: int
    served: int
    lost: int  # answered deadline_exceeded (drop_lost)
    unfinished: int  # no first token by the end (no replica ever took them)
    ttft_slo_ms: float  # image-text requests' (every request's unless text_ttft_slo_ms)
    text_ttft_slo_ms: float  # text-only requests'
    slo_attainment: float  # fraction of requests with TTFT <= their class's SLO
    ttft_mean_ms: float  # over the requests served
    ttft_p50_ms: float
    ttft_p99_ms: float
    ttft_p99_text_ms: float  # over the text-only requests (NaN: none)
    ttft_p99_image_ms: float  # over the image-text requests (NaN: none)
    meets_slo: bool  # each class's P99 TTFT within its SLO
    tbt_p50_ms: float
    tbt_p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    to_llm_p99_ms: float  # arrival -> LLM router (the encoders and the hand-off), image requests
    llm_ttft_p99_ms: float  # LLM router -> first token (queueing, prefill, the monolith's encode)
    accelerators: int
    accelerator_hours: float
    offered_rps: float
    served_rps: float

    @property
    def slo_ratio(self) -> float:
        """The worst class's P99 TTFT / its SLO (<= 1: meets the SLOs)."""
        ratios = [p / slo for p, slo in ((self.ttft_p99_text_ms, self.text_ttft_slo_ms),
                                         (self.ttft_p99_image_ms, self.ttft_slo_ms))
                  if not np.isnan(p)]
        return max(ratios) if ratios else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(result: GenSimResult) -> GenSummary:
    """A run's summary (sim.py makes the run; this module reads it)."""
    cfg = result.config
    counted = result.arrival_s >= cfg.warmup_s
    ttft = result.ttft_ms()[counted]
    outcome = result.outcome[counted]
    served = outcome == OK
    late = np.where(np.isnan(ttft), np.inf, ttft)
    images = counted & (result.num_images > 0)
    has_images = result.num_images[counted] > 0
    slos = cfg.slos
    slo_ms = np.where(has_images, slos.slo_ms(1), slos.slo_ms(0))
    p99 = {IMAGE_TEXT: percentile(late[has_images], 99),
           TEXT_ONLY: percentile(late[~has_images], 99)}
    to_llm = (result.llm_s - result.arrival_s)[images & (result.outcome == OK)] * 1000.0
    llm_ttft = (result.first_s - result.llm_s)[counted & (result.outcome == OK)] * 1000.0
    arrivals = result.arrival_s[counted]
    span = float(arrivals.max() - arrivals.min()) if arrivals.size > 1 else 0.0
    n = int(counted.sum())
    return GenSummary(
        requests=n, served=int(served.sum()), lost=int((outcome == LOST).sum()),
        unfinished=int(np.isnan(ttft).sum() - (outcome == LOST).sum()),
        ttft_slo_ms=slos.slo_ms(1), text_ttft_slo_ms=slos.slo_ms(0),
        slo_attainment=float((late <= slo_ms).mean()) if n else float("nan"),
        ttft_mean_ms=float(ttft[served].mean()) if served.any() else float("nan"),
        ttft_p50_ms=percentile(late, 50), ttft_p99_ms=percentile(late, 99),
        ttft_p99_text_ms=p99[TEXT_ONLY], ttft_p99_image_ms=p99[IMAGE_TEXT],
        meets_slo=bool(n) and slos.meets(p99),
        tbt_p50_ms=percentile(_finite(result.tbt_ms()[counted]), 50),
        tbt_p99_ms=percentile(_finite(result.tbt_ms()[counted]), 99),
        e2e_p50_ms=percentile(_finite(result.e2e_ms()[counted]), 50),
        e2e_p99_ms=percentile(_finite(result.e2e_ms()[counted]), 99),
        to_llm_p99_ms=percentile(to_llm, 99), llm_ttft_p99_ms=percentile(llm_ttft, 99),
        accelerators=cfg.accelerators,
        accelerator_hours=result.accelerator_seconds / 3600.0,
        offered_rps=n / span if span > 0 else float("nan"),
        served_rps=float(served.sum()) / span if span > 0 else float("nan"))


def _finite(values: NDArray[np.float64]) -> NDArray[np.float64]:
    return values[np.isfinite(values)]
