"""Labelled data from `classifiers[].dataset`, as held-out `Example`s in wire form.

- imagefolder: `<path>/<label name>/<image file>` (PNG, JPEG, WebP); a label's index is its
  place in the family's label names when it has them, else in the sorted folder names;
- jsonl: one `{"inputs": {...}, "label": <index or name>, "task"?: <task>}` per line.

Items are split half and half into `val` (warm-up, checks) and `test` (the accuracy profile) by
a hash of their place (the file's relative path, the line's number): deterministic, and a file
added later does not move the others.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deployments.models.base import Example
from deployments.models.sources import DatasetConfig

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


class DatasetError(ValueError):
    """Labelled data that cannot be read as configured (the message names the path)."""


@dataclass(frozen=True)
class LabelledData:
    """The items of a dataset and the label names they were indexed by."""

    items: tuple[tuple[str, Example], ...]  # (place, example)
    label_names: tuple[str, ...] | None

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        if split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test', got {split!r}")
        want = 0 if split == "val" else 1
        out = [ex for place, ex in self.items
               if ex.task == task and _half(place) == want]
        return out if limit is None else out[:limit]


def _half(place: str) -> int:
    return hashlib.sha256(place.encode()).digest()[0] & 1


def read_dataset(cfg: DatasetConfig, task: str, label_names: tuple[str, ...] | None
                 ) -> LabelledData:
    """The dataset's items (at most `max_items`, in a stable order), labels as indices."""
    path = Path(cfg.path)
    if not path.exists():
        raise DatasetError(f"dataset {path} does not exist")
    if cfg.format == "imagefolder":
        return _image_folder(path, task, label_names, cfg.max_items)
    return _jsonl(path, task, label_names, cfg.max_items)


def _image_folder(root: Path, task: str, names: tuple[str, ...] | None,
                  max_items: int) -> LabelledData:
    if not root.is_dir():
        raise DatasetError(f"dataset {root}: an imagefolder dataset is a directory")
    folders = sorted(d.name for d in root.iterdir() if d.is_dir())
    if len(folders) < 2:
        raise DatasetError(f"dataset {root}: needs a folder per label (found {folders})")
    labels = names or tuple(folders)
    unknown = [f for f in folders if f not in labels]
    if unknown:
        raise DatasetError(f"dataset {root}: folders {unknown} are not label names of the "
                           f"model ({list(labels)[:20]})")
    items: list[tuple[str, Example]] = []
    for folder in folders:
        for f in sorted((root / folder).iterdir()):
            if f.suffix.lower() in IMAGE_SUFFIXES and f.is_file():
                image = base64.b64encode(f.read_bytes()).decode("ascii")
                items.append((f"{folder}/{f.name}",
                              Example({"image": image}, labels.index(folder), task)))
    if not items:
        raise DatasetError(f"dataset {root}: no {'/'.join(IMAGE_SUFFIXES)} images")
    return LabelledData(tuple(_spread(items, max_items)), tuple(labels))


def _spread(items: list[tuple[str, Example]], max_items: int) -> list[tuple[str, Example]]:
    """At most `max_items`, taken evenly across the (label-sorted) list."""
    if len(items) <= max_items:
        return items
    step = len(items) / max_items
    return [items[int(i * step)] for i in range(max_items)]


def _jsonl(path: Path, task: str, names: tuple[str, ...] | None,
           max_items: int) -> LabelledData:
    items: list[tuple[str, Example]] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            inputs, label = row["inputs"], row["label"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise DatasetError(f"dataset {path} line {number}: expected an object with "
                               f"`inputs` and `label` ({type(exc).__name__})") from None
        index = _label_index(label, names, f"dataset {path} line {number}")
        items.append((f"line {number}", Example(inputs, index, str(row.get("task", task)))))
    if not items:
        raise DatasetError(f"dataset {path}: no items")
    return LabelledData(tuple(_spread(items, max_items)), names)


def _label_index(label: Any, names: tuple[str, ...] | None, where: str) -> int:
    if isinstance(label, bool):
        raise DatasetError(f"{where}: label {label!r} is neither an index nor a name")
    if isinstance(label, int):
        if label < 0 or (names is not None and label >= len(names)):
            raise DatasetError(f"{where}: label index {label} out of range")
        return label
    if isinstance(label, str) and names is not None and label in names:
        return names.index(label)
    raise DatasetError(f"{where}: label {label!r} is not an index"
                       + (f" or one of {list(names)[:20]}" if names else " (the model has no "
                          "label names)"))
