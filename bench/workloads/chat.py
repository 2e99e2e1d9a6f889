"""The live chat workload: the traffic of one `ChatTrafficSpec` (app/sim/traces/chat_spec.py,
the spec the generation simulator reads too) written out as requests of held-out material, so
the same settings give the same requests on every system.

- Every request carries its expected answer (held-out digits and facts), so answers are
  checked under load.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.sim.traces.chat_spec import ChatTrafficSpec, ContextShape, chat_arrivals


@dataclass(frozen=True)
class ExamplePool:
    """Held-out material: the answer word of every test image (index = image id), the
    held-out arithmetic facts (question, answer) and the image tasks' questions."""

    digit_words: tuple[str, ...]
    facts: tuple[tuple[str, str], ...]
    digit_question: str = "which digit is this?"
    sequence_question: str = "read the digits"


@dataclass(frozen=True)
class GenRequest:
    index: int
    arrival_s: float
    task: str  # "arithmetic" (text only), "digit" (one image) or "sequence" (2..max images)
    question: str
    answer: str
    image_ids: tuple[int, ...]
    history: tuple[tuple[str, str], ...]  # earlier (question, answer) turns, oldest first
    max_tokens: int
    in_burst: bool

    @property
    def num_images(self) -> int:
        return len(self.image_ids)


def make_workload(spec: ChatTrafficSpec, shape: ContextShape, pool: ExamplePool) -> list[GenRequest]:
    """The requests of one run, in arrival order (same spec, same requests): the spec's
    arrivals (app/sim/traces/chat_spec.py) written out with the pool's held-out material."""
    out = []
    for a in chat_arrivals(spec, shape, len(pool.digit_words), len(pool.facts)):
        if a.fact_id is not None:
            (question, answer), task = pool.facts[a.fact_id], "arithmetic"
        else:
            answer = " ".join(pool.digit_words[x] for x in a.image_ids)
            task = "digit" if a.num_images == 1 else "sequence"
            question = pool.digit_question if a.num_images == 1 else pool.sequence_question
        history = tuple(pool.facts[x] for x in a.history_fact_ids)
        out.append(GenRequest(a.index, a.arrival_s, task, question, answer, a.image_ids,
                              history, a.max_tokens, a.in_burst))
    return out


def describe(requests: list[GenRequest]) -> dict[str, Any]:
    """Counts of a workload (what the report prints beside the figures)."""
    n = len(requests)
    sizes = [r.num_images for r in requests if r.num_images]
    return {"requests": n, "text_only": sum(1 for r in requests if not r.num_images),
            "with_images": len(sizes), "images": sum(sizes),
            "images_per_request": {str(k): sizes.count(k) for k in sorted(set(sizes))},
            "in_bursts": sum(1 for r in requests if r.in_burst),
            "history_turns": {str(k): sum(1 for r in requests if len(r.history) == k)
                              for k in sorted({len(r.history) for r in requests})}}
