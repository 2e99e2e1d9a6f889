"""Registry and training: unknown names, caching (safetensors + JSON), staleness, determinism.

Training here uses tiny configs on a fifth of the images (about 1 s to 3 s a run): caching and
determinism do not need accuracy. The fully trained families are the session's
(`trained_models_dir` in tests/conftest.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from deployments.models import (
    family,
    fusion,
    ladder,
    registry,
    scene_fusion,
    scene_vit,
    vit_tokens,
)
from deployments.models import train_families as train
from deployments.models.data import DataConfig

# 20 % train / 60 % val / 20 % test: a third of the default training set, one view per item
TINY_DATA = DataConfig(val_frac=0.6, test_views=1, val_views=1)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def tiny_family() -> family.FamilyConfig:
    return family.FamilyConfig(data=TINY_DATA, epochs=1)


def test_unknown_name_lists_valid_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fusion") as err:
        registry.load_model("resnet", cache_dir=tmp_path)
    assert all(name in str(err.value)
               for name in ("vit", "family", "fusion", "ladder", "scenefusion", "scenevit"))
    assert registry.family_names() == ("vit", "fusion", "family", "ladder", "scenefusion",
                                       "scenevit")


def test_train_caches_and_load_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = dataclasses.replace(train.SPECS["family"], config=tiny_family)
    monkeypatch.setitem(train.SPECS, "family", spec)
    model = registry.load_model("family", cache_dir=tmp_path)
    weights, meta_path = train.cache_paths("family", tmp_path)
    assert weights.is_file() and meta_path.is_file()
    assert not list(tmp_path.glob("*.pt")) and not list(tmp_path.glob("*.pkl"))
    meta = json.loads(meta_path.read_text())
    assert meta["config_hash"] == train.config_hash(tiny_family())
    assert set(meta["test_accuracy"]["digits"]) == {v.name for v in model.variants()}
    assert set(load_file(str(weights))) == set(model.model.state_dict())

    def fail(cfg: object) -> None:
        raise AssertionError("should load from the cache, not train")

    monkeypatch.setitem(train.SPECS, "family", dataclasses.replace(spec, train=fail))
    again = registry.load_model("family", cache_dir=tmp_path)
    ex = again.examples("test", "digits", limit=4)
    items = [again.decode(e.inputs, "digits") for e in ex]
    v = again.variants()[-1]
    assert again.run(v, "digits", items) == model.run(v, "digits", items)

    # a changed config makes the cache stale -> retrain
    changed = dataclasses.replace(spec, train=fail,
                                  config=lambda: dataclasses.replace(tiny_family(), lr=1e-3))
    monkeypatch.setitem(train.SPECS, "family", changed)
    with pytest.raises(AssertionError, match="not train"):
        registry.load_model("family", cache_dir=tmp_path)


def test_config_hash_tracks_every_field() -> None:
    base = train.config_hash(vit_tokens.VitConfig())
    assert base == train.config_hash(vit_tokens.VitConfig())
    assert base != train.config_hash(vit_tokens.VitConfig(depth=5))
    assert base != train.config_hash(vit_tokens.VitConfig(data=DataConfig(noise_std=0.2)))


def test_family_training_is_deterministic() -> None:
    a, acc_a = family.train(tiny_family())
    b, acc_b = family.train(tiny_family())
    assert train.weights_digest(a) == train.weights_digest(b)
    assert acc_a == acc_b
    # training moved every member: equal digests are not two untouched initialisations
    untrained = family.build(tiny_family())
    for name, member in a.members.items():
        assert train.weights_digest(member) != train.weights_digest(untrained.members[name]), name


def test_vit_training_is_deterministic() -> None:
    cfg = vit_tokens.VitConfig(data=TINY_DATA, embed_dim=16, depth=2, heads=2, stem_channels=8,
                               gammas=(-2, 0, 2), pretrain_epochs=1, probe_epochs=1,
                               prompt_epochs=1)
    a, acc_a = vit_tokens.train(cfg)
    b, acc_b = vit_tokens.train(cfg)
    assert train.weights_digest(a) == train.weights_digest(b)
    assert acc_a == acc_b and set(acc_a) == {"digits", "parity", "loops"}
    assert train.weights_digest(a) != train.weights_digest(vit_tokens.build(cfg))


def test_fusion_training_is_deterministic() -> None:
    cfg = fusion.FusionConfig(embed_dim=16, depth=1, heads=2, stem_channels=4, epochs=1)
    a, _ = fusion.train(cfg)
    b, _ = fusion.train(cfg)
    assert train.weights_digest(a) == train.weights_digest(b)
    assert train.weights_digest(a) != train.weights_digest(fusion.build(cfg))


def test_ladder_training_is_deterministic() -> None:
    scenes = dataclasses.replace(ladder.LadderConfig().scenes, split=TINY_DATA, test_scenes=40)
    cfg = ladder.LadderConfig(scenes=scenes, train_scenes=24, epochs=1, batch_size=8)
    a, acc_a = ladder.train(cfg)
    b, acc_b = ladder.train(cfg)
    assert train.weights_digest(a) == train.weights_digest(b)
    assert acc_a == acc_b
    assert set(acc_a["digits"]) == {ladder.variant_name(m) for m in ladder.MEMBERS}
    untrained = ladder.build(cfg)
    for key, net in a.nets.items():  # every net trained, not two equal initialisations
        assert train.weights_digest(net) != train.weights_digest(untrained.nets[key]), key


def test_scene_fusion_training_is_deterministic() -> None:
    scenes = dataclasses.replace(ladder.LadderConfig().scenes, split=TINY_DATA, test_scenes=40)
    cfg = scene_fusion.SceneFusionConfig(scenes=scenes, image_arch="resnet10t", image_side=32,
                                         train_scenes=24, epochs=1, batch_size=8)
    a, acc_a = scene_fusion.train(cfg)
    b, acc_b = scene_fusion.train(cfg)
    assert train.weights_digest(a) == train.weights_digest(b)
    assert acc_a == acc_b
    assert set(acc_a["digits"]) == {scene_fusion.variant_name(s) for s in scene_fusion.SUBSETS}
    untrained = scene_fusion.build(cfg)
    for part in ("image", "audio", "words"):  # every encoder trained
        assert train.weights_digest(getattr(a, part)) != train.weights_digest(
            getattr(untrained, part)), part


def test_scene_vit_trains_deterministically_on_the_ladders_frozen_trunk() -> None:
    scenes = dataclasses.replace(ladder.LadderConfig().scenes, split=TINY_DATA, test_scenes=40)
    base = ladder.build(ladder.LadderConfig())
    state = {f"nets.{k}": v for k, v in base.nets.state_dict().items()}
    cfg = scene_vit.SceneVitConfig(scenes=scenes, embed_dim=32, depth=2, heads=2,
                                   train_scenes=24, steps=3, batch_size=8, keep_tokens=12)
    a, acc_a = scene_vit.train(cfg, state)
    b, acc_b = scene_vit.train(cfg, state)
    assert train.weights_digest(a) == train.weights_digest(b) and acc_a == acc_b
    assert set(acc_a["digits"]) == {scene_vit.variant_name(g) for g in cfg.gammas}
    trunk = base.nets[cfg.trunk_net]  # the ladder's stem and first two stages, unchanged
    for mine, theirs in ((a.trunk[0], trunk.conv1), (a.trunk[1], trunk.bn1),
                         (a.trunk[4], trunk.layer1), (a.trunk[5], trunk.layer2)):
        assert train.weights_digest(mine) == train.weights_digest(theirs)
    untrained = scene_vit.build(cfg)
    assert train.weights_digest(a.backbone.blocks) != train.weights_digest(
        untrained.backbone.blocks)  # the transformer trained


def test_a_family_on_a_base_needs_the_base_trained(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="train ladder first"):
        train.train_and_save("scenevit", tmp_path)


def test_training_leaves_global_state_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    family.train(dataclasses.replace(tiny_family(), epochs=0))
    assert torch.equal(torch.rand(3), expected)
    assert not torch.are_deterministic_algorithms_enabled()
