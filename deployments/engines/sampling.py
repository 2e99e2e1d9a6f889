"""How a generation chooses its tokens, as the OpenAI API's fields say it, checked once at the
ingress and carried unchanged to either engine (vLLM's `SamplingParams`; the transformers
engine's `choose_token`). Torch-free: the ingress builds it.

`temperature` 0 is greedy (the most likely token; `top_p`, `top_k` and `seed` then change
nothing). Above 0 the token is drawn from the softmax of logits / temperature, after the
presence and frequency penalties (OpenAI's definitions: minus `presence_penalty` once for every
token already generated, minus `frequency_penalty` times its count), cut to the `top_k` most
likely (0: no cut) and to the smallest set whose probability reaches `top_p`. A `seed` makes
the draw repeatable: the same request with the same seed gives the same tokens on the same
engine. `stop`: up to 4 strings; the answer ends before the first one found (finish_reason
"stop", the string not included). `ignore_eos`: generate `max_tokens` whatever the model says.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_STOP_SEQUENCES = 4
MAX_STOP_CHARS = 256


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: no cut
    seed: int | None = None
    stop: tuple[str, ...] = ()
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        checks = (
            (0.0 <= self.temperature <= 2.0, f"temperature {self.temperature} not in 0..2"),
            (0.0 < self.top_p <= 1.0, f"top_p {self.top_p} not in (0, 1]"),
            (self.top_k >= 0, f"top_k {self.top_k} is negative (0: no cut)"),
            (-2.0 <= self.presence_penalty <= 2.0,
             f"presence_penalty {self.presence_penalty} not in -2..2"),
            (-2.0 <= self.frequency_penalty <= 2.0,
             f"frequency_penalty {self.frequency_penalty} not in -2..2"),
            (len(self.stop) <= MAX_STOP_SEQUENCES,
             f"{len(self.stop)} stop sequences: at most {MAX_STOP_SEQUENCES}"),
            (all(0 < len(s) <= MAX_STOP_CHARS for s in self.stop),
             f"each stop sequence must be 1..{MAX_STOP_CHARS} characters"),
        )
        for ok, problem in checks:
            if not ok:
                raise ValueError(problem)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def penalised(self) -> bool:
        return self.presence_penalty != 0.0 or self.frequency_penalty != 0.0

    def held_back_chars(self) -> int:
        """How much of the text a stream keeps back so that a stop sequence split between two
        tokens is never sent before it is recognised."""
        return max((len(s) for s in self.stop), default=1) - 1


def cut_at_stop(text: str, stop: tuple[str, ...]) -> int | None:
    """Where the text ends at its first stop sequence (the index the answer stops before), or
    None when none occurs."""
    found = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(found) if found else None
