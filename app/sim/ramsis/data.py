"""Loader for the RAMSIS public profiles (`<shared data>/ramsis`, see its SOURCE.md); the caller
passes the shared data directory (`python -m bench ramsis --data-dir`).

Each `<model>_bsize-<B>_profile.json[.gz]` is a JSON list of per-batch wall-clock seconds. We keep
mean/p50/p95/p99 per (model, B); `policies.profile.LatencyModel` then applies RAMSIS's treatment
(p95, per-model linear fill of missing B, suffix minimum) so the same numbers feed our code.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant

IMAGE_MODELS = (
    "shufflenet_v2_x0_5", "mobilenet_v3_large", "efficientnet_b0", "efficientnet_b2",
    "efficientnet_b3", "efficientnet_b4", "efficientnet_v2_s", "efficientnet_v2_m",
    "efficientnet_v2_l",
)
TEXT_MODELS = ("bert_tiny", "bert_mini", "bert_small", "bert_medium", "bert_base")
TASK_DIRS = {"image": "image_cloud_cpu", "text": "text_cloud_cpu"}
_FILE_RE = re.compile(r"^(?P<model>.+)_bsize-(?P<b>\d+)_profile\.json(\.gz)?$")


def _read_samples(path: Path) -> NDArray[Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return np.asarray(json.load(fh), dtype=float)


def _accuracies(root: Path, task: str) -> dict[str, float]:
    with open(root / "derived" / "model_accuracy.csv") as fh:
        return {row["model"]: float(row["top1_accuracy_pct"]) / 100.0
                for row in csv.DictReader(fh) if row["task"] == task}


def _points(model_dir: Path) -> list[LatencyPoint]:
    points = []
    for path in model_dir.iterdir():
        match = _FILE_RE.match(path.name)
        if not match:
            continue
        ms = _read_samples(path) * 1000.0
        p50, p95, p99 = np.percentile(ms, [50, 95, 99])
        points.append(LatencyPoint(int(match["b"]), float(p50), float(p95), float(p99),
                                   float(ms.mean()), int(ms.size)))
    return sorted(points, key=lambda p: p.batch_size)


def _root(data_dir: Path) -> Path:
    root = Path(data_dir) / "ramsis"
    if not root.is_dir():
        raise FileNotFoundError(f"no ramsis/ under the shared data directory {data_dir} "
                                "(pass it with --data-dir)")
    return root


def load_ramsis_profile(task: str = "image", models: tuple[str, ...] | None = None, *,
                        data_dir: Path) -> Profile:
    """The RAMSIS profile of `task` ("image" or "text") for `models` (default: the paper's list),
    read from `data_dir` (the shared data directory)."""
    if task not in TASK_DIRS:
        raise ValueError(f"unknown task {task!r}; valid: {sorted(TASK_DIRS)}")
    root = _root(data_dir)
    models = models or (IMAGE_MODELS if task == "image" else TEXT_MODELS)
    acc = _accuracies(root, task)
    variants = []
    for model in models:
        model_dir = root / "profiles" / TASK_DIRS[task] / model
        if not model_dir.is_dir() or model not in acc:
            raise ValueError(f"no RAMSIS profile for {task}/{model}")
        variants.append(VariantProfile(Variant(name=model, model=model), acc[model],
                                       tuple(_points(model_dir))))
    return Profile(name=f"ramsis-{task}", hardware=TASK_DIRS[task], variants=tuple(variants),
                   metadata={"source": "dmmendo/RAMSIS@9b74967", "percentile_used": "p95"})


def load_all_ramsis_models(task: str = "image", *, data_dir: Path) -> Profile:
    """Every model of the task that has both a profile directory and an accuracy."""
    root = _root(data_dir)
    acc = _accuracies(root, task)
    present = sorted(p.name for p in (root / "profiles" / TASK_DIRS[task]).iterdir()
                     if p.is_dir() and p.name in acc)
    return load_ramsis_profile(task, tuple(present), data_dir=data_dir)
