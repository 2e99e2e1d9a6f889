"""The GPU variant's model path (docs/deploy.md: `device: cuda`): every family, task and variant
answers the held-out items on CUDA as it does on the CPU. Runs where torch sees a GPU
(`pytest -m gpu tests/unit/test_gpu_families.py`); skipped elsewhere, CI included. Not yet run
on a GPU: the session that wrote it was refused its GPU loan (2026-11-28)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deployments.models.base import ServableModel
from deployments.models.registry import family_names, load_model
from policies.types import Variant

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]
ITEMS, BATCH = 256, 32
AGREEMENT = 0.99  # float32 CPU and GPU kernels may flip a near-tie, not more


def _labels(model: ServableModel, task: str, items: list[dict[str, torch.Tensor]],
            variant: Variant) -> list[int]:
    out: list[int] = []
    for start in range(0, len(items), BATCH):
        out += [p.label for p in model.run(variant, task, items[start:start + BATCH])]
    return out


@pytest.mark.parametrize("name", family_names())
def test_cuda_answers_as_the_cpu_does(name: str, trained_models_dir: Path) -> None:
    cpu = load_model(name, trained_models_dir, "cpu")
    gpu = load_model(name, trained_models_dir, "cuda")
    module = gpu.model  # type: ignore[attr-defined]  # each servable holds its torch module
    assert all(p.is_cuda for p in module.parameters())
    for task in cpu.tasks():
        examples = cpu.examples("test", task, limit=ITEMS)
        items = [cpu.decode(e.inputs, task) for e in examples]
        truth = [e.label for e in examples]
        for variant in cpu.variants():
            on_cpu = _labels(cpu, task, items, variant)
            on_gpu = _labels(gpu, task, items, variant)
            agree = sum(a == b for a, b in zip(on_cpu, on_gpu, strict=True)) / len(items)
            assert agree >= AGREEMENT, (name, task, variant.name, agree)
            acc_cpu = sum(a == y for a, y in zip(on_cpu, truth, strict=True)) / len(items)
            acc_gpu = sum(a == y for a, y in zip(on_gpu, truth, strict=True)) / len(items)
            assert abs(acc_cpu - acc_gpu) <= 1 - AGREEMENT, (name, task, variant.name)
