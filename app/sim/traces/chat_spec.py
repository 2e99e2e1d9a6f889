"""Mixed chat traffic shaped like ModServe's (its section 3 traces, scaled to the VLM we train),
as one seeded spec that feeds both the live chat workload (`bench/workloads/chat.py` turns each
arrival into a real OpenAI body of held-out material) and the generation simulator
(`sim_requests`): the same spec and seed give the same arrivals, image counts and prompt
lengths in both, as `spec.py` does for the classify path. Pure (numpy only).

- Text-only and image-text requests: `image_share` of the mean rate carries images.
- Images per request heavy-tailed on 1..max_images: P(n) proportional to n^-images_zipf_a
  (with a=1.5 and 8 images: 44% one image, 16% two, 2% eight).
- Prompt lengths heavy-tailed: a request carries h earlier (question, answer) turns with
  P(h >= k) = (1 + k)^-history_pareto_a, capped by what fits the context with the request's
  images and `max_tokens`.
- Arrivals: text requests Poisson at their mean rate; image requests Poisson whose rate is
  `burst_factor` x their mean inside bursts (fixed length `burst_s`, exponential gaps, a share
  `burst_fraction` of the time on average) and lower outside, so the mean holds. Bursts are
  independent of the text traffic.
- Which held-out item a request asks about is drawn here too, as an index into the pool the
  live side holds (`pool_images`, `pool_facts`), so the live bodies are a function of the spec.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from app.sim.generation.requests import GenRequest as SimRequest


@dataclass(frozen=True)
class ChatTrafficSpec:
    rate_rps: float  # mean requests/s, all kinds together
    duration_s: float
    seed: int = 0
    image_share: float = 0.5  # of requests carrying images (mean)
    max_images: int = 8
    images_zipf_a: float = 1.5
    burst_factor: float = 4.0  # image rate inside a burst, x the image mean rate
    burst_fraction: float = 0.15  # mean share of the time inside bursts
    burst_s: float = 3.0  # length of one burst
    history_max_turns: int = 8
    history_pareto_a: float = 1.5
    max_tokens: int = 16

    def __post_init__(self) -> None:
        if self.rate_rps <= 0 or self.duration_s <= 0:
            raise ValueError("rate_rps and duration_s must be positive")
        if not 0.0 <= self.image_share <= 1.0:
            raise ValueError(f"image_share must be in [0, 1], got {self.image_share}")
        if self.burst_factor < 1.0 or not 0.0 <= self.burst_fraction < 1.0:
            raise ValueError("burst_factor >= 1 and 0 <= burst_fraction < 1 required")
        if self.burst_factor * self.burst_fraction >= 1.0:
            raise ValueError(f"burst_factor x burst_fraction must be < 1 (the mean rate could "
                             f"not hold), got {self.burst_factor * self.burst_fraction:g}")
        if self.max_images < 1 or self.max_tokens < 1:
            raise ValueError("max_images and max_tokens must be >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ContextShape:
    """What bounds a request's size: the context, image tokens, and upper bounds of the
    tokens of a one-turn prompt without images and of one earlier turn."""

    context_len: int
    tokens_per_image: int
    base_prompt_tokens: int
    turn_tokens: int

    def room_for_turns(self, num_images: int, max_tokens: int) -> int:
        left = (self.context_len - max_tokens - self.base_prompt_tokens
                - num_images * self.tokens_per_image)
        return max(0, left // max(1, self.turn_tokens))


@dataclass(frozen=True)
class ChatArrival:
    """One request of the traffic, before it is written out: indices into the held-out pool."""

    index: int
    arrival_s: float
    in_burst: bool
    image_ids: tuple[int, ...]  # () for a text-only request
    fact_id: int | None  # the question of a text-only request
    history_fact_ids: tuple[int, ...]  # earlier turns, oldest first
    max_tokens: int

    @property
    def num_images(self) -> int:
        return len(self.image_ids)


def image_count_probs(max_images: int, zipf_a: float) -> Any:
    """P(n images) for n = 1..max_images, proportional to n^-a."""
    w = np.arange(1, max_images + 1, dtype=float) ** -zipf_a
    return w / w.sum()


def burst_windows(spec: ChatTrafficSpec, rng: np.random.Generator) -> list[tuple[float, float]]:
    """[start, end) of the bursts in [0, duration): fixed length, exponential gaps whose mean
    makes `burst_fraction` of the time bursts; the first gap starts at a random phase."""
    if spec.burst_fraction == 0.0 or spec.burst_factor == 1.0:
        return []
    mean_gap = spec.burst_s * (1.0 - spec.burst_fraction) / spec.burst_fraction
    out, t = [], float(rng.exponential(mean_gap) * rng.uniform())
    while t < spec.duration_s:
        out.append((t, min(t + spec.burst_s, spec.duration_s)))
        t += spec.burst_s + float(rng.exponential(mean_gap))
    return out


def _poisson(rate: float, start: float, end: float, rng: np.random.Generator) -> list[float]:
    if rate <= 0 or end <= start:
        return []
    n = int(rng.poisson(rate * (end - start)))
    return sorted(float(x) for x in rng.uniform(start, end, n))


def image_arrivals(spec: ChatTrafficSpec, windows: list[tuple[float, float]],
                   rng: np.random.Generator) -> list[tuple[float, bool]]:
    """(time, in_burst) of the image requests: burst_factor x the mean inside the windows,
    (1 - factor x fraction) / (1 - fraction) x the mean outside."""
    mean = spec.rate_rps * spec.image_share
    inside = mean * spec.burst_factor if windows else mean
    outside = (mean * (1.0 - spec.burst_factor * spec.burst_fraction)
               / (1.0 - spec.burst_fraction)) if windows else mean
    out: list[tuple[float, bool]] = []
    t = 0.0
    for start, end in windows:
        out += [(x, False) for x in _poisson(outside, t, start, rng)]
        out += [(x, True) for x in _poisson(inside, start, end, rng)]
        t = end
    out += [(x, False) for x in _poisson(outside, t, spec.duration_s, rng)]
    return out


def history_turns(spec: ChatTrafficSpec, room: int, rng: np.random.Generator) -> int:
    """h with P(h >= k) = (1 + k)^-a (a Lomax draw, floored), capped by the room and the max."""
    draw = int(np.floor(rng.pareto(spec.history_pareto_a)))
    return max(0, min(draw, room, spec.history_max_turns))


def _arrival(i: int, t: float, in_burst: bool, num_images: int, spec: ChatTrafficSpec,
             shape: ContextShape, pool_images: int, pool_facts: int,
             rng: np.random.Generator) -> ChatArrival:
    if num_images == 0:
        fact: int | None = int(rng.integers(pool_facts))
        ids = tuple[int, ...]()
    else:
        fact = None
        ids = tuple(int(x) for x in rng.choice(pool_images, num_images, replace=False))
    h = history_turns(spec, shape.room_for_turns(num_images, spec.max_tokens), rng)
    history = tuple(int(x) for x in rng.integers(pool_facts, size=h))
    return ChatArrival(i, t, in_burst, ids, fact, history, spec.max_tokens)


def chat_arrivals(spec: ChatTrafficSpec, shape: ContextShape, pool_images: int,
                  pool_facts: int) -> list[ChatArrival]:
    """The requests of one run, in arrival order (same spec, same requests)."""
    if shape.room_for_turns(spec.max_images, spec.max_tokens) < 0 or (
            shape.base_prompt_tokens + spec.max_images * shape.tokens_per_image
            + spec.max_tokens > shape.context_len):
        raise ValueError(f"{spec.max_images} images + prompt + {spec.max_tokens} tokens do "
                         f"not fit the context of {shape.context_len}")
    if pool_images < spec.max_images or pool_facts < 1:
        raise ValueError("the example pool is too small for the workload")
    rng = np.random.default_rng(spec.seed)
    text = [(t, False, 0) for t in _poisson(spec.rate_rps * (1.0 - spec.image_share), 0.0,
                                              spec.duration_s, rng)]
    probs = image_count_probs(spec.max_images, spec.images_zipf_a)
    images = [(t, b, int(rng.choice(spec.max_images, p=probs)) + 1)
              for t, b in image_arrivals(spec, burst_windows(spec, rng), rng)]
    arrivals = sorted(text + images, key=lambda a: a[0])
    return [_arrival(i, t, b, n, spec, shape, pool_images, pool_facts, rng)
            for i, (t, b, n) in enumerate(arrivals)]


def sim_requests(arrivals: list[ChatArrival], shape: ContextShape) -> list[SimRequest]:
    """The same requests as the generation simulator serves them: text tokens at the shape's
    upper bounds (the one-turn prompt plus each earlier turn), images, and `max_tokens` out."""
    return [SimRequest(a.arrival_s,
                       shape.base_prompt_tokens + shape.turn_tokens * len(a.history_fact_ids),
                       a.num_images, a.max_tokens) for a in arrivals]
