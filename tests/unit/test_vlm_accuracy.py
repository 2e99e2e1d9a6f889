"""The shipped VLM answers for real: held-out accuracy through the saved model directory
(transformers loads it; greedy generate), on a subset of every task. The directory comes from
the session's `trained_vlm_dir` (tests/conftest.py: trained once into the repository's cache,
a few minutes when stale, then loaded instantly), hence `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from transformers import AutoTokenizer

from deployments.models.vlm import VlmConfig, load_model, read_meta
from deployments.models.vlm import data as vlm_data
from deployments.models.vlm.evaluate import greedy_answers

pytestmark = pytest.mark.slow

# Floors a few points under what the shipped model scores on these subsets (digit 0.983,
# sequence 0.763, arithmetic 0.815; docs/vlm.md), so another CPU's rounding passes.
FLOORS = {"digit": 0.93, "sequence": 0.7, "arithmetic": 0.75}
LIMITS = {"digit": 120, "sequence": 80, "arithmetic": 92}


def test_held_out_accuracy(trained_vlm_dir: Path) -> None:
    torch.set_num_threads(1)
    cfg = VlmConfig()
    model = load_model(trained_vlm_dir)
    tok = AutoTokenizer.from_pretrained(trained_vlm_dir)
    splits = vlm_data.digit_splits(cfg.data)
    images = vlm_data.render(splits["test"].images, cfg.vision.image_size_px, cfg.data)
    accuracy = {}
    for task, examples in vlm_data.test_examples(cfg.data, splits).items():
        examples = examples[:LIMITS[task]]
        answers = greedy_answers(model, tok, cfg, examples, images)
        accuracy[task] = sum(a == e.answer for a, e in zip(answers, examples, strict=True))
        accuracy[task] /= len(examples)
    assert all(accuracy[t] >= FLOORS[t] for t in FLOORS), accuracy
    meta = read_meta(trained_vlm_dir)
    assert meta is not None and meta["config_hash"] == cfg.config_hash()
