"""What a generation simulation runs: the serving path, each stage's replicas and policies.

A stage is a pool of replicas of one kind: image encoders (ModServe's image instances) and LLM
replicas (text instances), or, on the monolith path, LLM replicas that also run the vision tower
(plain vLLM). `accelerators_per_replica` is the replica's tensor-parallel degree (ModServe §5.2:
monolith TP-4, text instance TP-4, image instance TP-1); the stage profiles are per replica, i.e.
already measured or built at that degree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from policies.generation.ttft_slo import TTFTSLOs


def _parse(enum: type[StrEnum], name: str | StrEnum, what: str) -> StrEnum:
    try:
        return enum(name)
    except ValueError:
        raise ValueError(f"unknown {what} {name!r}; valid: {[e.value for e in enum]}") from None


class ServePath(StrEnum):
    DISAGGREGATED = "disaggregated"  # images -> encoder pool -> LLM pool
    MONOLITH = "monolith"  # every replica encodes and generates (plain vLLM)


class Order(StrEnum):
    DEADLINE = "deadline"  # earliest TTFT deadline first (policies.generation.stage_batch)
    FIFO = "fifo"  # in the order the work reached the replica


class Routing(StrEnum):
    TOKENS = "tokens"  # least pending route tokens (policies.generation.token_routing, as the live routers)
    LEAST_REQUESTS = "least_requests"  # least outstanding requests (a plain load balancer)
    ROUND_ROBIN = "round_robin"
    RANDOM = "random"


@dataclass(frozen=True)
class StageConfig:
    replicas: int
    accelerators_per_replica: int = 1
    routing: Routing = Routing.TOKENS
    order: Order = Order.DEADLINE
    startup_s: float = 0.0  # a replica added during a run serves only this long after

    def __post_init__(self) -> None:
        object.__setattr__(self, "routing", _parse(Routing, self.routing, "routing"))
        object.__setattr__(self, "order", _parse(Order, self.order, "order"))
        if self.replicas < 0 or self.accelerators_per_replica < 1 or self.startup_s < 0:
            raise ValueError(f"need replicas >= 0, accelerators_per_replica >= 1, "
                             f"startup_s >= 0: {self}")


@dataclass(frozen=True)
class GenSimConfig:
    path: ServePath
    llm: StageConfig
    encoder: StageConfig = field(default_factory=lambda: StageConfig(0))  # unused by a monolith
    ttft_slo_ms: float = 1000.0  # a request's TTFT deadline is arrival + this (image-text ones,
    # and text-only ones too unless text_ttft_slo_ms is set: ModServe §5.1's per-class SLOs)
    text_ttft_slo_ms: float | None = None
    encoder_max_batch: int = 8  # images per encoder batch
    max_running: int = 256  # sequences an LLM replica decodes at once (vLLM max_num_seqs)
    max_prefill_tokens: int = 8192  # an LLM iteration's token budget (vLLM's
    # max_num_batched_tokens): chunked, decodes (1 token each) first, then prompts, the last one
    # split; unchunked, the prompt tokens admitted per iteration (at least one whole prompt)
    chunked_prefill: bool = True  # vLLM V1's default; False: a prompt's whole prefill in one
    # iteration (the simulator's first model, for comparison)
    transfer_ms_per_image: float = 0.0  # encoder -> LLM hand-off of a request's image tokens
    prompt_tokens_until_done: bool = False  # an LLM replica's route-token count holds a prompt
    # until its first token (prefill work, as the live replica); True: until its last token
    drop_lost: bool = False  # answer deadline_exceeded where the live stages would (see sim.py)
    min_prefill_ms: float = 5.0  # with drop_lost: less left than this at the LLM is lost (live)
    warmup_s: float = 0.0  # requests arriving earlier are served but left out of the summary
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _parse(ServePath, self.path, "path"))
        if self.ttft_slo_ms <= 0 or self.encoder_max_batch < 1 or self.max_running < 1:
            raise ValueError("need ttft_slo_ms > 0, encoder_max_batch >= 1, max_running >= 1")
        TTFTSLOs(self.ttft_slo_ms, self.text_ttft_slo_ms)  # checks text_ttft_slo_ms
        if self.max_prefill_tokens < 1 or min(self.transfer_ms_per_image, self.warmup_s,
                                               self.min_prefill_ms) < 0:
            raise ValueError("need max_prefill_tokens >= 1 and transfer_ms_per_image, "
                             "warmup_s, min_prefill_ms >= 0")

    @property
    def slos(self) -> TTFTSLOs:
        return TTFTSLOs(self.ttft_slo_ms, self.text_ttft_slo_ms)

    @property
    def monolith(self) -> bool:
        return self.path is ServePath.MONOLITH

    @property
    def accelerators(self) -> int:
        """Accelerators the configuration holds at its initial replica counts."""
        llm = self.llm.replicas * self.llm.accelerators_per_replica
        if self.monolith:
            return llm
        return llm + self.encoder.replicas * self.encoder.accelerators_per_replica
