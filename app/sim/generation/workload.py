"""Generated multimodal workloads for the generation simulator, calibrated to ModServe's published
trace statistics (seed 001, Section 3.2, Figures 10 and 11; Section 5.1; docs/sim_workloads.md).

- Two independent arrival processes (§3.2 Insight 6: image bursts are independent of text
  traffic): text-only and image-text requests, each a nonhomogeneous Poisson process with its own
  diurnal curve; image-driven bursts (`ImageBurst`) add image-text requests from a service with
  many images per request (§3.2 "Image-Driven Bursts": more requests *and* more images each).
  Every process draws from its own random stream (`SeedSequence(seed, spawn_key=(k,))`), so the
  text-only requests are identical whatever the image-text traffic or its bursts.
- Prompt lengths (`PowerLawTokens`): a power-law tail with Pareto tail index `alpha`,
  P(X > x) = 0.5 (x / median)^-alpha above the median (§3.2: alpha = 2.9 text-only, 4.4
  image-text; the paper's sentence "a higher alpha means a heavier tail" contradicts its own next
  sentence, "image-text ... shorter tails", unless alpha is read as a tail index, where higher
  means lighter), a log-uniform body below it. For image-text requests the law is on the prompt's
  text tokens; the image tokens (num_images x the model's tokens per image) come on top.
- Images per image-text request: a truncated discrete power law P(n) ~ n^-exponent on 1..16
  (§3.2 Figure 11b: "varies significantly with a heavy tail"; §5.1: 0 to 16 images per request).
- Output lengths (`LogNormalTokens`): log-normal, median 128 tokens, sigma 0.9 (our choice; the
  paper publishes no output-length law; the Azure LLM 2023 conversation trace has median 129).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.sim.generation.requests import GenRequest

MAX_IMAGES = 16  # §5.1: the production trace has 0 to 16 images per request
LLAMA32_TOKENS_PER_IMAGE = 1601  # §3.2 (Figure 12's setup): Llama3.2-11B, 1601 tokens per image
DAY_S = 86400.0


@dataclass(frozen=True)
class PowerLawTokens:
    """Token counts: log-uniform on [min_tokens, median_tokens) with probability 0.5, and an exact
    Pareto tail above the median, P(X > x) = 0.5 (x / median_tokens)^-alpha; rounded, capped at
    max_tokens."""

    alpha: float
    median_tokens: int
    min_tokens: int
    max_tokens: int

    def __post_init__(self) -> None:
        if self.alpha <= 1:
            raise ValueError(f"alpha must be > 1 (a finite mean), got {self.alpha}")
        if not 1 <= self.min_tokens <= self.median_tokens <= self.max_tokens:
            raise ValueError(f"need 1 <= min_tokens <= median_tokens <= max_tokens: {self}")

    def sample(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        survival = 1.0 - rng.random(n)  # in (0, 1]
        med, low = float(self.median_tokens), float(self.min_tokens)
        tail = med * np.power(2.0 * np.minimum(survival, 0.5), -1.0 / self.alpha)
        body = med * np.power(low / med, 2.0 * np.maximum(survival, 0.5) - 1.0)
        values = np.rint(np.where(survival <= 0.5, tail, body))
        return np.clip(values, self.min_tokens, self.max_tokens).astype(np.int64)

    def mean_tokens(self) -> float:
        med, low, cap, a = (float(self.median_tokens), float(self.min_tokens),
                            float(self.max_tokens), self.alpha)
        body = med if low == med else (med - low) / math.log(med / low)
        tail = med + med / (a - 1.0) * (1.0 - (cap / med) ** (1.0 - a))  # E[min(X, cap) | X > med]
        return 0.5 * body + 0.5 * tail


@dataclass(frozen=True)
class LogNormalTokens:
    median_tokens: float
    sigma: float
    max_tokens: int

    def __post_init__(self) -> None:
        if self.median_tokens < 1 or self.sigma < 0 or self.max_tokens < 1:
            raise ValueError(f"need median_tokens >= 1, sigma >= 0, max_tokens >= 1: {self}")

    def sample(self, rng: np.random.Generator, n: int) -> NDArray[np.int64]:
        values = np.rint(self.median_tokens * np.exp(self.sigma * rng.standard_normal(n)))
        return np.clip(values, 1, self.max_tokens).astype(np.int64)


def image_count_pmf(exponent: float, max_images: int = MAX_IMAGES) -> NDArray[np.float64]:
    """P(n) for n = 1..max_images, proportional to n^-exponent (exponent 0: uniform)."""
    weights = np.arange(1, max_images + 1, dtype=float) ** -exponent
    return np.asarray(weights / weights.sum(), dtype=np.float64)


def mean_images(exponent: float, max_images: int = MAX_IMAGES) -> float:
    pmf = image_count_pmf(exponent, max_images)
    return float((np.arange(1, max_images + 1) * pmf).sum())


@dataclass(frozen=True)
class Diurnal:
    """Rate mean_rps * (1 + amplitude * cos(2 pi (t - peak_s) / period_s)) requests/s."""

    mean_rps: float
    amplitude: float = 0.0
    peak_s: float = 0.0
    period_s: float = DAY_S

    def __post_init__(self) -> None:
        if self.mean_rps < 0 or not 0 <= self.amplitude <= 1 or self.period_s <= 0:
            raise ValueError(f"need mean_rps >= 0, 0 <= amplitude <= 1, period_s > 0: {self}")

    def rate_rps(self, t_s: NDArray[np.float64]) -> NDArray[np.float64]:
        phase = 2.0 * np.pi * (t_s - self.peak_s) / self.period_s
        return np.asarray(self.mean_rps * (1.0 + self.amplitude * np.cos(phase)), dtype=np.float64)


@dataclass(frozen=True)
class ImageBurst:
    """Extra image-text requests from an image-heavy service (e.g. video): `extra_rps` at the
    plateau, linear ramps of `ramp_s` at both ends, images per request ~ n^-images_exponent."""

    start_s: float
    duration_s: float
    extra_rps: float
    ramp_s: float = 1200.0
    images_exponent: float = 0.0

    def __post_init__(self) -> None:
        if self.start_s < 0 or self.extra_rps < 0 or self.ramp_s < 0:
            raise ValueError(f"need start_s, extra_rps, ramp_s >= 0: {self}")
        if self.duration_s < 2 * self.ramp_s or self.duration_s <= 0:
            raise ValueError(f"duration_s must be positive and >= 2 * ramp_s: {self}")

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    def rate_rps(self, t_s: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.ramp_s == 0:
            level = ((t_s >= self.start_s) & (t_s < self.end_s)).astype(float)
        else:
            level = np.clip(np.minimum(t_s - self.start_s, self.end_s - t_s) / self.ramp_s, 0, 1)
        return np.asarray(self.extra_rps * level, dtype=np.float64)


TEXT_ONLY_PROMPT = PowerLawTokens(alpha=2.9, median_tokens=1000, min_tokens=128, max_tokens=32768)
IMAGE_TEXT_PROMPT = PowerLawTokens(alpha=4.4, median_tokens=400, min_tokens=32, max_tokens=16384)
OUTPUT_TOKENS = LogNormalTokens(median_tokens=128.0, sigma=0.9, max_tokens=4096)


@dataclass(frozen=True)
class WorkloadSpec:
    duration_s: float
    text_only: Diurnal
    image_text: Diurnal
    bursts: tuple[ImageBurst, ...] = ()
    text_only_prompt: PowerLawTokens = TEXT_ONLY_PROMPT
    image_text_prompt: PowerLawTokens = IMAGE_TEXT_PROMPT
    images_exponent: float = 2.0  # the steady image-text services; mean 2.13 images per request
    output: LogNormalTokens = OUTPUT_TOKENS
    step_s: float = 1.0  # the rate curves are held constant over steps of this length

    def __post_init__(self) -> None:
        if self.duration_s <= 0 or self.step_s <= 0:
            raise ValueError(f"need positive duration_s and step_s: {self}")


@dataclass(frozen=True, eq=False)
class TraceArrays:
    """A workload as columns (sorted by arrival), the fast form of a list of GenRequest."""

    arrival_s: NDArray[np.float64]
    text_tokens: NDArray[np.int64]
    num_images: NDArray[np.int64]
    output_tokens: NDArray[np.int64]
    duration_s: float

    def __post_init__(self) -> None:
        sizes = {a.size for a in (self.arrival_s, self.text_tokens, self.num_images,
                                  self.output_tokens)}
        if len(sizes) != 1:
            raise ValueError(f"columns of different lengths: {sorted(sizes)}")

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def requests(self) -> list[GenRequest]:
        return list(map(GenRequest, self.arrival_s.tolist(), self.text_tokens.tolist(),
                        self.num_images.tolist(), self.output_tokens.tolist()))

    @classmethod
    def from_requests(cls, requests: list[GenRequest],
                      duration_s: float | None = None) -> TraceArrays:
        arrival = np.array([r.arrival_s for r in requests], dtype=np.float64)
        end = float(arrival.max()) if arrival.size else 0.0
        return cls(arrival, np.array([r.text_tokens for r in requests], dtype=np.int64),
                   np.array([r.num_images for r in requests], dtype=np.int64),
                   np.array([r.output_tokens for r in requests], dtype=np.int64),
                   end if duration_s is None else duration_s)


def poisson_arrivals(rate: Callable[[NDArray[np.float64]], NDArray[np.float64]],
                     duration_s: float, step_s: float,
                     rng: np.random.Generator) -> NDArray[np.float64]:
    """Sorted arrivals of a Poisson process whose rate is rate(midpoint) over each step."""
    starts = np.arange(0.0, duration_s, step_s)
    widths = np.minimum(step_s, duration_s - starts)
    counts = rng.poisson(np.maximum(rate(starts + widths / 2), 0.0) * widths)
    offsets = rng.random(int(counts.sum())) * np.repeat(widths, counts)
    return np.sort(np.repeat(starts, counts) + offsets)


def _process(spec: WorkloadSpec, seed: int, key: int,
             rate: Callable[[NDArray[np.float64]], NDArray[np.float64]],
             prompt: PowerLawTokens, images_exponent: float | None) -> tuple[NDArray[Any], ...]:
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(key,)))
    arrivals = poisson_arrivals(rate, spec.duration_s, spec.step_s, rng)
    n = arrivals.size
    text = prompt.sample(rng, n)
    images: NDArray[np.int64] = np.zeros(n, dtype=np.int64)
    if images_exponent is not None:
        pmf = image_count_pmf(images_exponent)
        images = rng.choice(np.arange(1, MAX_IMAGES + 1), size=n, p=pmf).astype(np.int64)
    return arrivals, text, images, spec.output.sample(rng, n)


def generate_arrays(spec: WorkloadSpec, seed: int) -> TraceArrays:
    """The workload as columns; the same (spec, seed) gives the same trace."""
    parts = [_process(spec, seed, 0, spec.text_only.rate_rps, spec.text_only_prompt, None),
             _process(spec, seed, 1, spec.image_text.rate_rps, spec.image_text_prompt,
                      spec.images_exponent)]
    parts += [_process(spec, seed, 2 + i, burst.rate_rps, spec.image_text_prompt,
                       burst.images_exponent) for i, burst in enumerate(spec.bursts)]
    columns = [np.concatenate([part[c] for part in parts]) for c in range(4)]
    order = np.argsort(columns[0], kind="stable")
    arrival, text, images, output = (col[order] for col in columns)
    return TraceArrays(arrival, text, images, output, float(spec.duration_s))


def generate(spec: WorkloadSpec, seed: int) -> list[GenRequest]:
    return generate_arrays(spec, seed).requests()


def steady(rate_rps: float, image_share: float, duration_s: float) -> WorkloadSpec:
    """Constant-rate Poisson traffic for load sweeps: image_share of the requests image-text."""
    if rate_rps <= 0 or not 0 <= image_share <= 1:
        raise ValueError(f"need rate_rps > 0 and 0 <= image_share <= 1: {rate_rps}, {image_share}")
    return WorkloadSpec(duration_s, Diurnal(rate_rps * (1 - image_share)),
                        Diurnal(rate_rps * image_share))


def one_day_image_burst(mean_rps: float, *, image_share: float = 0.2,
                        burst_start_h: float = 6.5, burst_hours: float = 3.0,
                        peak_prompt_ratio: float = 5.0,
                        tokens_per_image: int = LLAMA32_TOKENS_PER_IMAGE) -> WorkloadSpec:
    """One day (from midnight) like the paper's Figure 10/16 interval: text-only traffic with a
    diurnal curve (amplitude 0.5, peak 14:00), image-text traffic with its own (amplitude 0.3,
    peak 20:00: in quadrature, so the two curves are uncorrelated over the day, §3.2 "minimal
    correlation"), `mean_rps` requests/s on average outside the burst, `image_share` of them
    image-text; and one image-driven burst of `burst_hours` from `burst_start_h` (06:30-09:30 by
    default: centred at 08:00, where the text curve crosses its mean on the way up, so the burst
    does not correlate the two request rates either) by a service sending 1..16 images
    uniformly (mean 8.5, 4x the steady 2.13). The burst's rate is set so
    that the image-text prompt token rate (text + images x tokens_per_image) reaches
    `peak_prompt_ratio` x the text-only one at one point of its plateau and stays below it
    elsewhere (§3.2: "up to 5x higher prompt token rates"). At 1601 tokens per image an
    image-text request carries 3.8x the prompt tokens of a text-only one on average, so the
    ratio outside the burst is about 1 with a 20% image share (about 2 at night, text's trough)
    and the 5x peak is the burst's. Scales linearly with mean_rps."""
    if mean_rps <= 0 or not 0 <= image_share < 1 or burst_hours <= 0:
        raise ValueError("need mean_rps > 0, 0 <= image_share < 1, burst_hours > 0: "
                         f"{mean_rps}, {image_share}, {burst_hours}")
    text = Diurnal(mean_rps * (1 - image_share), 0.5, 14 * 3600.0)
    image = Diurnal(mean_rps * image_share, 0.3, 20 * 3600.0)
    shape = ImageBurst(burst_start_h * 3600.0, burst_hours * 3600.0, 0.0,
                       min(1200.0, burst_hours * 1800.0))
    base = WorkloadSpec(DAY_S, text, image)
    extra = burst_rate_for_ratio(base, shape, peak_prompt_ratio, tokens_per_image)
    burst = ImageBurst(shape.start_s, shape.duration_s, extra, shape.ramp_s, shape.images_exponent)
    return WorkloadSpec(DAY_S, text, image, (burst,))


def burst_rate_for_ratio(spec: WorkloadSpec, burst: ImageBurst, ratio: float,
                         tokens_per_image: int) -> float:
    """The plateau rate at which the burst lifts the expected image-text prompt token rate to
    `ratio` x the text-only one at one point of the plateau, and to at most that elsewhere."""
    plateau = np.linspace(burst.start_s + burst.ramp_s, burst.end_s - burst.ramp_s,
                          241).astype(np.float64)
    text_tps = spec.text_only.rate_rps(plateau) * spec.text_only_prompt.mean_tokens()
    per_request = spec.image_text_prompt.mean_tokens() + tokens_per_image * mean_images(
        spec.images_exponent)
    base_tps = spec.image_text.rate_rps(plateau) * per_request
    burst_per_request = spec.image_text_prompt.mean_tokens() + tokens_per_image * mean_images(
        burst.images_exponent)
    extra = float(np.min((ratio * text_tps - base_tps) / burst_per_request))
    if extra <= 0:
        raise ValueError(f"image-text prompt tokens already reach {ratio}x the text-only ones "
                         "during the burst without it: lower image_share or raise the ratio")
    return extra
