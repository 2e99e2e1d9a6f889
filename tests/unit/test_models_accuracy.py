"""Held-out accuracy of the trained families (through the wire path: examples -> decode -> run).

The weights come from the session's `trained_models_dir` (tests/conftest.py), which trains once
per session when the cache is missing or stale; what is left here is evaluation (~20 s), hence
`slow`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from deployments.models.base import ServableModel
from deployments.models.registry import load_model, read_metadata

LIMIT = 300

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def models(trained_models_dir: Path) -> dict[str, ServableModel]:
    torch.set_num_threads(1)
    return {name: load_model(name, cache_dir=trained_models_dir)
            for name in ("vit", "fusion", "family", "ladder", "scenefusion", "scenevit")}


def wire_accuracy(model: ServableModel, task: str, limit: int | None = LIMIT) -> dict[str, float]:
    examples = model.examples("test", task, limit=limit)
    items = [model.decode(e.inputs, task) for e in examples]
    out = {}
    for variant in model.variants():
        preds = [p for i in range(0, len(items), 64)
                 for p in model.run(variant, task, items[i:i + 64])]
        out[variant.name] = sum(p.label == e.label for p, e in zip(preds, examples, strict=True))
        out[variant.name] /= len(examples)
    return out


def test_vit_accuracy(models: dict[str, ServableModel]) -> None:
    floors = {"digits": 0.75, "parity": 0.8, "loops": 0.8}
    for task, floor in floors.items():
        acc = wire_accuracy(models["vit"], task)
        assert min(acc.values()) > floor, (task, acc)


def test_fusion_accuracy(models: dict[str, ServableModel], trained_models_dir: Path) -> None:
    meta = read_metadata("fusion", trained_models_dir)
    assert meta is not None
    acc = meta["test_accuracy"]["digits"]  # the full test split
    full = acc["fusion/image+audio+text"]
    assert full > 0.7
    for name, value in acc.items():
        assert value > 0.2, name  # every subset is well above chance (0.1)
        if name.count("+") == 0:
            assert full > value + 0.03, name  # all three beat any single modality
    # the most expensive modality (audio) is not the most informative one
    assert acc["fusion/audio"] < acc["fusion/image"]
    wired = wire_accuracy(models["fusion"], "digits", limit=200)
    assert wired["fusion/image+audio+text"] > 0.65


def test_family_pareto(models: dict[str, ServableModel], trained_models_dir: Path) -> None:
    meta = read_metadata("family", trained_models_dir)
    assert meta is not None
    acc = meta["test_accuracy"]["digits"]
    names = [v.name for v in models["family"].variants()]  # ordered by size
    values = [acc[n] for n in names]
    assert values == sorted(values) and len(set(values)) == len(values), acc
    assert values[-1] > 0.85
    wired = wire_accuracy(models["family"], "digits")
    assert wired[names[-1]] > wired[names[0]] + 0.15


def test_ladder_accuracy_rises_with_cost(models: dict[str, ServableModel],
                                         trained_models_dir: Path) -> None:
    """The model-selection ladder's shape rule on held-out scenes: each rung more accurate than
    the cheaper ones, >= 10 points between the ends (its cost rules: test_ladder_shape)."""
    meta = read_metadata("ladder", trained_models_dir)
    assert meta is not None
    acc = meta["test_accuracy"]["digits"]
    names = [v.name for v in models["ladder"].variants()]  # ordered by cost
    values = [acc[n] for n in names]
    assert values == sorted(values) and len(set(values)) == len(values), acc
    assert values[-1] - values[0] >= 0.10, acc


def test_ladder_serves_what_it_was_measured_on(models: dict[str, ServableModel]) -> None:
    """The wire path (PNG -> decode at each rung's size -> run) answers as the training's own
    evaluation does (`ladder.evaluate`: the scenes resized in memory) on the same test scenes."""
    from deployments.models import ladder
    from deployments.models.scenes import at_size, held_out

    model = models["ladder"]
    assert isinstance(model, ladder.LadderServable)
    n = 120
    images, _ = held_out("test", model.cfg.scenes)
    items = [model.decode(e.inputs, "digits") for e in model.examples("test", "digits", limit=n)]
    for rung, variant in zip(ladder.MEMBERS, model.variants(), strict=True):
        wired = [p.label for p in model.run(variant, "digits", items)]
        with torch.inference_mode():
            direct = model.members[variant.name].module(at_size(images[:n], rung.side))
        assert wired == direct.argmax(-1).tolist(), variant.name


def test_scene_fusion_serves_what_it_was_measured_on(models: dict[str, ServableModel],
                                                    trained_models_dir: Path) -> None:
    """Every subset answers through the wire (PNG scene, audio list, text) as the training's
    evaluation measured it on the same held-out items, and the modalities have MOSEL's shape:
    image and audio each informative alone, together better than either."""
    meta = read_metadata("scenefusion", trained_models_dir)
    assert meta is not None
    measured = meta["test_accuracy"]["digits"]
    wired = wire_accuracy(models["scenefusion"], "digits", limit=None)
    for name, value in measured.items():
        assert abs(wired[name] - value) < 1e-6, name
    alone = {m: measured[f"scenefusion/{m}"] for m in ("image", "audio", "text")}
    both = measured["scenefusion/image+audio"]
    assert both > alone["image"] > alone["audio"] > alone["text"] + 0.2, measured


def test_scene_vit_serves_what_it_was_measured_on(models: dict[str, ServableModel],
                                                 trained_models_dir: Path) -> None:
    """Every gamma answers through the wire (PNG scene) as the training's evaluation computes it
    (from the trunk's maps) on the same held-out scenes (64 of them: the ViT is dear at 1
    thread); keeping all 144 tokens beats merging the most and every setting is far above
    chance on the full test split."""
    from deployments.models.scenes import at_size, held_out

    model = models["scenevit"]
    vit = model.model  # type: ignore[attr-defined]
    n = 64
    images, _ = held_out("test", vit.cfg.scenes)
    items = [model.decode(e.inputs, "digits") for e in model.examples("test", "digits", limit=n)]
    with torch.inference_mode():
        maps = vit.trunk(at_size(images[:n], vit.cfg.side))
        for variant in model.variants():
            wired = [p.label for p in model.run(variant, "digits", items)]
            feats, _ = vit.through_blocks(vit.tokens_from_trunk(maps), "digits", variant.gamma)
            direct = vit.heads[vit.head_key("digits", variant.gamma)](feats).argmax(-1)
            same = sum(a == b for a, b in zip(wired, direct.tolist(), strict=True))
            assert same >= n - 1, (variant.name, same)  # float order across batch sizes
    meta = read_metadata("scenevit", trained_models_dir)
    assert meta is not None
    measured = meta["test_accuracy"]["digits"]
    assert measured["scenevit/g0"] > measured["scenevit/g-72"] + 0.01, measured
    assert min(measured.values()) > 0.6, measured


def test_metadata_matches_wire_accuracy(models: dict[str, ServableModel],
                                        trained_models_dir: Path) -> None:
    meta = read_metadata("vit", trained_models_dir)
    assert meta is not None
    full = wire_accuracy(models["vit"], "digits", limit=None)
    for name, value in meta["test_accuracy"]["digits"].items():
        assert abs(full[name] - value) < 1e-6, name  # same predictions (1 item = 1e-3)
