"""What the generation simulator serves: one multimodal request of a workload (a generated trace
or a loaded Azure LMM trace), the boundary between the workload code and the simulator."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GenRequest:
    arrival_s: float  # seconds from the start of the workload
    text_tokens: int  # prompt text tokens (the images' tokens are not included)
    num_images: int
    output_tokens: int  # tokens the model generates (the trace's GeneratedTokens)

    def __post_init__(self) -> None:
        if self.arrival_s < 0 or min(self.text_tokens, self.num_images) < 0:
            raise ValueError(f"arrival_s, text_tokens and num_images must be >= 0: {self}")
        if self.output_tokens < 1:
            raise ValueError(f"output_tokens must be >= 1: {self}")
