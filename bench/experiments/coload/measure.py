"""How much busy neighbours slow the model (python -m bench coload): one variant at one
batch size on one torch thread, alone and then beside busy-loop processes, the live
benchmark's co-located serving stack in its simplest form."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deployments.models.cache import DEFAULT_MODELS_DIR


@dataclass(frozen=True)
class ColoadSettings:
    family: str = "family"
    variant: str = "family/cnn-xl"
    batch_size: int = 8
    busy_processes: int = 1
    models_dir: Path = DEFAULT_MODELS_DIR


@dataclass(frozen=True)
class ColoadResult:
    variant: str
    batch: int
    busy: int
    alone_p50_ms: float
    loaded_p50_ms: float

    @property
    def slowdown(self) -> float:
        return self.loaded_p50_ms / self.alone_p50_ms

    def to_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "batch": self.batch, "busy": self.busy,
                "alone_p50_ms": self.alone_p50_ms, "loaded_p50_ms": self.loaded_p50_ms,
                "slowdown": self.slowdown}


@contextmanager
def busy_neighbours(count: int) -> Iterator[None]:
    """`count` busy-loop processes beside whatever runs inside (a second machine state for the
    benches), stopped by pid on the way out."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(count)]
    try:
        yield
    finally:
        for b in burners:
            b.kill()
            b.wait()


def p50_ms(model: Any, variant: Any, task: str, items: list[Any], calls: int = 40) -> float:
    for _ in range(5):
        model.run(variant, task, items)
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        model.run(variant, task, items)
        times.append((time.perf_counter() - t) * 1000)
    return sorted(times)[calls // 2]


def measure_coload(settings: ColoadSettings) -> ColoadResult:
    import torch

    from deployments.models.registry import load_model

    torch.set_num_threads(1)
    model = load_model(settings.family, cache_dir=settings.models_dir, device="cpu")
    task = model.tasks()[0]
    items = [model.decode(e.inputs, task)
             for e in model.examples("test", task, limit=settings.batch_size)]
    by_name = {v.name: v for v in model.variants()}
    if settings.variant not in by_name:
        raise ValueError(f"unknown variant {settings.variant!r}; valid: {sorted(by_name)}")
    variant = by_name[settings.variant]
    alone = p50_ms(model, variant, task, items)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(settings.busy_processes)]
    try:
        time.sleep(1.0)
        loaded = p50_ms(model, variant, task, items)
    finally:
        for b in burners:
            b.kill()
    return ColoadResult(settings.variant, settings.batch_size, settings.busy_processes, alone,
                        loaded)
