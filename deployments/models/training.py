"""Small deterministic training helpers shared by the model families."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn

log = logging.getLogger(__name__)


@contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """Seed torch's global RNG and enable deterministic algorithms, restoring both afterwards."""
    previous = torch.are_deterministic_algorithms_enabled()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        torch.use_deterministic_algorithms(True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(previous)


def reset_linear_init(module: nn.Module) -> None:
    """PyTorch's default init for every Linear (timm's ViT init trains slowly on tiny data)."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            sub.reset_parameters()


def batches(n: int, batch_size: int, gen: torch.Generator) -> Iterator[torch.Tensor]:
    """Shuffled index batches covering 0..n-1 once."""
    perm = torch.randperm(n, generator=gen)
    for start in range(0, n, batch_size):
        yield perm[start:start + batch_size]


def optimizer(params: list[nn.Parameter], lr: float, steps: int, weight_decay: float = 0.05,
              ) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler]:
    """AdamW with a one-cycle schedule over `steps` steps."""
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1),
                                                pct_start=0.15)
    return opt, sched


def step(loss: torch.Tensor, opt: torch.optim.Optimizer,
         sched: torch.optim.lr_scheduler.LRScheduler) -> None:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()


@torch.no_grad()
def accuracy(predict: Callable[[torch.Tensor], torch.Tensor], inputs: torch.Tensor,
             labels: torch.Tensor, batch_size: int = 256) -> float:
    """Top-1 accuracy of `predict` (inputs -> logits) over batches of `inputs`."""
    correct = 0
    for start in range(0, len(labels), batch_size):
        logits = predict(inputs[start:start + batch_size])
        correct += int((logits.argmax(-1) == labels[start:start + batch_size]).sum())
    return correct / max(len(labels), 1)


class Stopwatch:
    """Logs elapsed wall time of named phases."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.start = time.perf_counter()

    def lap(self, phase: str) -> float:
        elapsed = time.perf_counter() - self.start
        log.info("%s: %s done after %.1fs", self.what, phase, elapsed)
        return elapsed
