"""The transformers engine's token choice for a `Sampling` (deployments/engines/sampling.py):
greedy, or a draw after penalties, temperature, top-k and top-p, from the request's own
generator (seeded: the same request gives the same tokens)."""

from __future__ import annotations

import torch

from deployments.engines.sampling import Sampling


def generator_for(sampling: Sampling) -> torch.Generator | None:
    """The request's random source: seeded when a seed is given; None when greedy."""
    if sampling.greedy:
        return None
    g = torch.Generator()
    if sampling.seed is None:
        g.seed()
    else:
        g.manual_seed(sampling.seed)
    return g


def choose_token(logits: torch.Tensor, sampling: Sampling, generated: list[int],
                 generator: torch.Generator | None) -> int:
    """One token id from the last position's logits [vocab]."""
    logits = logits.float().reshape(-1)
    if sampling.penalised and generated:
        ids, counts = torch.unique(torch.tensor(generated), return_counts=True)
        logits = logits.clone()
        logits[ids] -= sampling.presence_penalty + sampling.frequency_penalty * counts.float()
    if sampling.greedy:
        return int(logits.argmax())
    logits = logits / sampling.temperature
    if 0 < sampling.top_k < logits.numel():
        kth = torch.topk(logits, sampling.top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if sampling.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # mass of the likelier tokens
        sorted_p = sorted_p.masked_fill(before >= sampling.top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(0, order, sorted_p)
    return int(torch.multinomial(probs, 1, generator=generator))
