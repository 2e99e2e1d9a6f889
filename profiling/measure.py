"""Measure a servable model on the hardware at hand: latency per (variant, batch size), accuracy.

Methodology (see docs/profiling.md): held-out items are decoded once up front, as the preprocess
stage does in serving, so only `model.run` is timed. Threads are pinned with
`torch.set_num_threads(threads)` as replicas do. Each (variant, batch size) point gets `warmup`
discarded calls, then timed calls (`time.perf_counter` around one `model.run`, CUDA synchronised)
until `min_time_s` of timed work *and* `min_repeats` samples, or `max_repeats` samples, whichever
comes first. Accuracy is the fraction correct on the full test split, measured per variant.
"""

from __future__ import annotations

import datetime as dt
import gc
import logging
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from deployments.models.base import Example, ServableModel
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant
from profiling.paths import profile_name

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZES = (1, 2, 4, 8, 16, 32)
Items = list[dict[str, torch.Tensor]]


@dataclass(frozen=True)
class MeasureConfig:
    """How hard to measure one latency point (the defaults keep a full profile to minutes)."""

    warmup: int = 2
    min_repeats: int = 5
    max_repeats: int = 30
    min_time_s: float = 0.3
    threads: int = 1

    def __post_init__(self) -> None:
        if self.warmup < 0 or self.min_repeats < 1 or self.max_repeats < self.min_repeats:
            raise ValueError(f"bad repeat settings: {self}")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")


def cpu_model_name() -> str:
    """The CPU model from /proc/cpuinfo (platform.processor() elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def hardware_string(device: torch.device) -> str:
    """`cuda:<device name>` for a GPU, `cpu:<CPU model>` otherwise."""
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return f"cpu:{cpu_model_name()}"


def decode_examples(model: ServableModel, examples: Sequence[Example], task: str) -> Items:
    """Decode wire inputs once (the preprocess stage), outside any timing."""
    return [model.decode(ex.inputs, task) for ex in examples]


def measure_accuracy(model: ServableModel, variant: Variant, task: str, items: Items,
                     labels: Sequence[int], batch_size: int = 32) -> float:
    """Fraction of `items` whose predicted label equals the true label."""
    if not items:
        raise ValueError("no held-out items to measure accuracy on")
    correct = 0
    for start in range(0, len(items), batch_size):
        chunk = items[start:start + batch_size]
        preds = model.run(variant, task, chunk)
        if len(preds) != len(chunk):
            raise RuntimeError(f"{variant.name}: run returned {len(preds)} predictions "
                               f"for {len(chunk)} items")
        correct += sum(int(p.label == y) for p, y in
                       zip(preds, labels[start:start + batch_size], strict=True))
    return correct / len(items)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_batch(model: ServableModel, variant: Variant, task: str, batch: Items,
               config: MeasureConfig, device: torch.device) -> list[float]:
    """Wall-clock milliseconds of timed `model.run` calls on one batch (warm-up discarded)."""
    for _ in range(config.warmup):
        model.run(variant, task, batch)
    _sync(device)
    samples: list[float] = []
    spent = 0.0
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection pause is not the model's latency (collected once per variant)
    try:
        while len(samples) < config.max_repeats:
            start = time.perf_counter()
            model.run(variant, task, batch)
            _sync(device)
            elapsed = time.perf_counter() - start
            samples.append(elapsed * 1000.0)
            spent += elapsed
            if spent >= config.min_time_s and len(samples) >= config.min_repeats:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def latency_point(batch_size: int, samples_ms: Sequence[float]) -> LatencyPoint:
    """Percentiles (numpy's linear interpolation, so p50 <= p95 <= p99) and the mean."""
    arr = np.asarray(samples_ms, dtype=np.float64)
    p50, p95, p99 = (float(x) for x in np.percentile(arr, [50, 95, 99]))
    return LatencyPoint(batch_size, p50, p95, p99, float(arr.mean()), int(arr.size))


def _batch(items: Items, size: int) -> Items:
    """The first `size` items, cycling when the split is smaller than the batch."""
    return [items[i % len(items)] for i in range(size)]


def _metadata(model_name: str, task: str, config: MeasureConfig, batch_sizes: Sequence[int],
              device: torch.device, num_test: int) -> dict[str, Any]:
    return {
        "model": model_name,
        "task": task,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": str(device),
        "threads": config.threads,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "batch_sizes": list(batch_sizes),
        "warmup": config.warmup,
        "min_repeats": config.min_repeats,
        "max_repeats": config.max_repeats,
        "min_time_s": config.min_time_s,
        "test_items": num_test,
        "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
        "cpu_count": os.cpu_count(),
    }


def _chosen_variants(model: ServableModel, names: Sequence[str] | None) -> list[Variant]:
    """The named variants in the order asked for (all of the model's when None)."""
    chosen = list(model.variants())
    if names is None:
        return chosen
    by_name = {v.name: v for v in chosen}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise ValueError(f"unknown variants {unknown}; valid: {list(by_name)}")
    return [by_name[n] for n in names]


def profile_model(model: ServableModel, task: str,
                  batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
                  warmup: int = 2, repeats: int = 30, threads: int = 1, progress: bool = True,
                  *, min_repeats: int = 5, min_time_s: float = 0.3,
                  device: torch.device | str = "cpu", name: str | None = None,
                  variants: Sequence[str] | None = None,
                  extra_metadata: dict[str, Any] | None = None) -> Profile:
    """Profile every variant of `model` (or the named `variants`) on `task`.

    `repeats` is the most timed calls per point; fewer are taken once `min_time_s` of timed work
    and `min_repeats` samples are in. The profile is named `<name or model.name>.<task>`.
    """
    if task not in model.tasks():
        raise ValueError(f"unknown task {task!r} for {model.name}; valid: {model.tasks()}")
    sizes = sorted(set(int(b) for b in batch_sizes))
    if not sizes or sizes[0] < 1:
        raise ValueError(f"batch sizes must be positive, got {list(batch_sizes)}")
    config = MeasureConfig(warmup, min(min_repeats, repeats), repeats, min_time_s, threads)
    dev = torch.device(device)
    chosen = _chosen_variants(model, variants)
    model_name = name or model.name
    examples = model.examples("test", task)
    items = decode_examples(model, examples, task)
    labels = [ex.label for ex in examples]
    metadata = _metadata(model_name, task, config, sizes, dev, len(items))
    metadata.update(extra_metadata or {})

    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(chosen) * (len(sizes) + 1), desc=f"profile {model_name}.{task}",
                   unit="point")
    started = time.perf_counter()
    results: list[VariantProfile] = []
    try:
        for variant in chosen:
            gc.collect()
            points = []
            for size in sizes:
                samples = time_batch(model, variant, task, _batch(items, size), config, dev)
                points.append(latency_point(size, samples))
                if bar is not None:
                    bar.set_postfix_str(f"{variant.name} b={size}")
                    bar.update(1)
            accuracy = measure_accuracy(model, variant, task, items, labels, max(sizes))
            if bar is not None:
                bar.update(1)
            log.info("%s.%s %s: accuracy %.4f, p50 at b=1 %.2f ms", model_name, task,
                     variant.name, accuracy, points[0].p50_ms)
            results.append(VariantProfile(variant, accuracy, tuple(points)))
    finally:
        torch.set_num_threads(previous_threads)
        if bar is not None:
            bar.close()
    metadata["profiling_s"] = round(time.perf_counter() - started, 2)
    return Profile(profile_name(model_name, task), hardware_string(dev), tuple(results), metadata)
