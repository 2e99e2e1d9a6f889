"""What a generation workload looks like over time, per modality, as the paper's Figure 10 plots
it (seed 001, §3.2): request rate and image rate per minute, prompt token rate per second
(text-only: text tokens; image-text: text + num_images x tokens_per_image), and a few scalar
statistics (peaks, the image-text / text-only prompt token ratio, their correlation, tail
indices). Works on a generated or a loaded trace (TraceArrays or a list of GenRequest)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from app.sim.generation.requests import GenRequest
from app.sim.generation.workload import LLAMA32_TOKENS_PER_IMAGE, TraceArrays


@dataclass(frozen=True, eq=False)
class TraceSummary:
    """Per-bin series; bin k covers [k * bin_s, (k + 1) * bin_s) seconds of the trace."""

    bin_s: float
    tokens_per_image: int
    bin_start_s: NDArray[np.float64]
    text_only_rpm: NDArray[np.float64]  # requests per minute
    image_text_rpm: NDArray[np.float64]
    images_per_min: NDArray[np.float64]
    text_only_prompt_tps: NDArray[np.float64]  # prompt tokens per second
    image_text_prompt_tps: NDArray[np.float64]  # text + image tokens
    image_tokens_tps: NDArray[np.float64]  # the image tokens alone


def summarize(trace: TraceArrays | list[GenRequest], *,
              tokens_per_image: int = LLAMA32_TOKENS_PER_IMAGE,
              bin_s: float = 60.0) -> TraceSummary:
    arrays = trace if isinstance(trace, TraceArrays) else TraceArrays.from_requests(trace)
    if bin_s <= 0 or tokens_per_image < 0:
        raise ValueError(f"need bin_s > 0 and tokens_per_image >= 0: {bin_s}, {tokens_per_image}")
    bins = max(1, math.ceil(arrays.duration_s / bin_s))
    index = np.minimum((arrays.arrival_s // bin_s).astype(np.int64), bins - 1)
    has_images = arrays.num_images > 0
    image_tokens = (arrays.num_images * tokens_per_image).astype(np.float64)

    def per_bin(weights: NDArray[np.float64], mask: NDArray[np.bool_]) -> NDArray[np.float64]:
        return np.bincount(index[mask], weights=weights[mask], minlength=bins).astype(np.float64)

    ones = np.ones(len(arrays))
    text = arrays.text_tokens.astype(np.float64)
    per_min, per_s = 60.0 / bin_s, 1.0 / bin_s
    return TraceSummary(
        bin_s, tokens_per_image, (np.arange(bins) * bin_s).astype(np.float64),
        per_bin(ones, ~has_images) * per_min, per_bin(ones, has_images) * per_min,
        per_bin(arrays.num_images.astype(float), has_images) * per_min,
        per_bin(text, ~has_images) * per_s, per_bin(text + image_tokens, has_images) * per_s,
        per_bin(image_tokens, has_images) * per_s)


def tail_index(values: NDArray[np.int64] | NDArray[np.float64], threshold: float) -> float:
    """Hill's estimate of the Pareto tail index from the values above `threshold` (nan when
    fewer than 10)."""
    tail = np.asarray(values, dtype=float)
    tail = tail[tail > threshold]
    if tail.size < 10 or threshold <= 0:
        return float("nan")
    return float(tail.size / np.log(tail / threshold).sum())


def _coarse(series: NDArray[np.float64], factor: int) -> NDArray[np.float64]:
    n = series.size // factor * factor
    return np.asarray(series[:n].reshape(-1, factor).mean(axis=1), dtype=np.float64)


def summary_stats(trace: TraceArrays | list[GenRequest], *,
                  tokens_per_image: int = LLAMA32_TOKENS_PER_IMAGE) -> dict[str, float]:
    """Scalar statistics: totals, per-minute peaks; over 10-minute bins, the peak and median
    image-text / text-only prompt token ratio and the correlation of the two request rates; the
    prompts' (text tokens') tail indices, Hill's estimate over the top quarter of each modality."""
    arrays = trace if isinstance(trace, TraceArrays) else TraceArrays.from_requests(trace)
    s = summarize(arrays, tokens_per_image=tokens_per_image, bin_s=60.0)
    image_tps, text_tps = _coarse(s.image_text_prompt_tps, 10), _coarse(s.text_only_prompt_tps, 10)
    ratio = image_tps[text_tps > 0] / text_tps[text_tps > 0]
    coarse_text, coarse_image = _coarse(s.text_only_rpm, 10), _coarse(s.image_text_rpm, 10)
    corr = (float(np.corrcoef(coarse_text, coarse_image)[0, 1])
            if coarse_text.size > 2 and coarse_text.std() > 0 and coarse_image.std() > 0
            else float("nan"))
    has_images = arrays.num_images > 0
    text_only, image_text = arrays.text_tokens[~has_images], arrays.text_tokens[has_images]
    return {
        "requests": float(len(arrays)),
        "duration_h": arrays.duration_s / 3600.0,
        "image_text_share": float(has_images.mean()) if len(arrays) else float("nan"),
        "mean_images_per_image_request": _mean(arrays.num_images[has_images]),
        "max_images": float(arrays.num_images.max()) if len(arrays) else 0.0,
        "text_only_rpm_mean": float(s.text_only_rpm.mean()),
        "text_only_rpm_peak": float(s.text_only_rpm.max()),
        "image_text_rpm_mean": float(s.image_text_rpm.mean()),
        "image_text_rpm_peak": float(s.image_text_rpm.max()),
        "images_per_min_median": float(np.median(s.images_per_min)),
        "images_per_min_peak": float(s.images_per_min.max()),
        "prompt_ratio_10min_peak": float(ratio.max()) if ratio.size else float("nan"),
        "prompt_ratio_10min_median": float(np.median(ratio)) if ratio.size else float("nan"),
        "rate_correlation_10min": corr,
        "text_only_prompt_median": _median(text_only),
        "image_text_text_median": _median(image_text),
        "text_only_tail_index": tail_index(text_only, _quartile(text_only)),
        "image_text_tail_index": tail_index(image_text, _quartile(image_text)),
        "output_tokens_median": _median(arrays.output_tokens),
    }


def _mean(values: NDArray[np.int64]) -> float:
    return float(values.mean()) if values.size else float("nan")


def _median(values: NDArray[np.int64]) -> float:
    return float(np.median(values)) if values.size else float("nan")


def _quartile(values: NDArray[np.int64]) -> float:
    return float(np.quantile(values, 0.75)) if values.size else float("nan")
