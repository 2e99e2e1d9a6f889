"""Structure of the model families (untrained weights): variants, token counts, ToMe, fusion
sequence lengths, one prediction per item, data splits."""

from __future__ import annotations

import pytest
import torch

from deployments.models import data, multimodal, tome
from deployments.models.base import ServableModel
from deployments.models.family import MEMBERS, FamilyConfig, FamilyServable, variant_name
from deployments.models.family import build as build_family
from deployments.models.fusion import SUBSETS, FusionConfig, FusionServable
from deployments.models.fusion import build as build_fusion
from deployments.models.fusion import tensors as fusion_tensors
from deployments.models.ladder import LadderConfig, LadderServable
from deployments.models.ladder import build as build_ladder
from deployments.models.scene_fusion import SceneFusionConfig, SceneFusionServable
from deployments.models.scene_fusion import build as build_scene_fusion
from deployments.models.scene_vit import SceneVitConfig, SceneViTServable
from deployments.models.scene_vit import build as build_scene_vit
from deployments.models.vit_tokens import TokenViTServable, VitConfig
from deployments.models.vit_tokens import build as build_vit
from policies.types import Variant


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def servables() -> dict[str, ServableModel]:
    torch.set_num_threads(1)
    return {
        "vit": TokenViTServable(build_vit(VitConfig())),
        "fusion": FusionServable(build_fusion(FusionConfig()), FusionConfig()),
        "family": FamilyServable(build_family(FamilyConfig()), FamilyConfig()),
        "ladder": LadderServable(build_ladder(LadderConfig()), LadderConfig()),
        "scenefusion": SceneFusionServable(build_scene_fusion(SceneFusionConfig()),
                                           SceneFusionConfig()),
        "scenevit": SceneViTServable(build_scene_vit(SceneVitConfig())),
    }


def test_variant_names_unique_and_typed(servables: dict[str, ServableModel]) -> None:
    names = [v.name for m in servables.values() for v in m.variants()]
    assert len(names) == len(set(names))
    vit = servables["vit"].variants()
    assert {v.gamma for v in vit} == set(VitConfig().gammas)
    assert all(v.model == "vit" and v.modalities == {"image"} for v in vit)
    assert "vit/g-4" in {v.name for v in vit}
    fusion = servables["fusion"].variants()
    assert len(fusion) == 7 and {v.modalities for v in fusion} == {frozenset(s) for s in SUBSETS}
    assert "fusion/image+text" in {v.name for v in fusion}
    family = servables["family"].variants()
    assert [v.name for v in family] == [variant_name(m) for m in MEMBERS]  # ordered by size
    assert all(v.model == v.name for v in family)
    ladder = servables["ladder"]
    assert [v.name for v in ladder.variants()] == [
        "ladder/r10t-32", "ladder/r10t-64", "ladder/r10t-96", "ladder/r10t+r34d-96"]  # by cost
    item = ladder.decode(ladder.examples("val", "digits", limit=1)[0].inputs, "digits")
    assert sorted(t.shape[-1] for t in item.values()) == [32, 64, 96]  # one per input size
    scenevit = servables["scenevit"].variants()
    assert [v.gamma for v in scenevit] == list(SceneVitConfig().gammas)
    assert all(v.model == "scenevit" and v.name == f"scenevit/g{v.gamma}" for v in scenevit)


@pytest.mark.parametrize("family", ["vit", "fusion", "family", "ladder", "scenefusion",
                                    "scenevit"])
def test_run_returns_one_prediction_per_item(servables: dict[str, ServableModel],
                                             family: str) -> None:
    model = servables[family]
    for task in model.tasks():
        items = [model.decode(ex.inputs, task) for ex in model.examples("val", task, limit=5)]
        for variant in model.variants():
            preds = model.run(variant, task, items)
            assert len(preds) == 5
            assert all(0 <= p.label < data.TASK_CLASSES[task] for p in preds), (variant, task)
            alone = model.run(variant, task, items[:1])[0]  # batching changes no answer
            assert alone.label == preds[0].label
            assert alone.confidence == pytest.approx(preds[0].confidence, abs=1e-4)
            assert model.run(variant, task, []) == []


def test_gamma_changes_token_counts() -> None:
    cfg = VitConfig()
    model = build_vit(cfg).eval()
    x = torch.rand(3, 1, 16, 16)
    with torch.no_grad():
        _, base = model.features(x, "digits", 0)
        assert base == [65] * (cfg.depth + 1)
        for gamma in (g for g in cfg.gammas if g < 0):
            _, counts = model.features(x, "digits", gamma)
            assert counts[0] == 65 and all(a > b for a, b in zip(counts, counts[1:], strict=False))
            r = -gamma
            assert counts[1] == 65 - min(r, 32)
        for gamma in (g for g in cfg.gammas if g > 0):
            _, counts = model.features(x, "parity", gamma)
            assert counts[:-1] == [65 + gamma] * cfg.depth


def test_prompts_are_per_task_and_nested() -> None:
    model = build_vit(VitConfig()).eval()
    x = torch.rand(2, 1, 16, 16)
    gen = torch.Generator().manual_seed(0)

    def perturb(p: torch.Tensor) -> None:
        p.add_(torch.randn(p.shape, generator=gen))  # (a constant shift would vanish in LayerNorm)

    with torch.no_grad():
        a = model(x, "digits", 4)
        perturb(model.prompts["parity"])  # other task's prompts do not matter
        assert torch.allclose(a, model(x, "digits", 4))
        perturb(model.prompts["digits"][:, 4:])  # prompts beyond gamma are unused
        assert torch.allclose(a, model(x, "digits", 4))
        perturb(model.prompts["digits"][:, :4])
        assert not torch.allclose(a, model(x, "digits", 4), atol=1e-3)


def test_tome_merge_is_size_weighted_and_protects_cls() -> None:
    torch.manual_seed(0)
    x = torch.randn(2, 9, 4)
    size = torch.rand(2, 9, 1) + 0.5
    keys = torch.randn(2, 9, 3)
    merged, new_size = tome.merge_tokens(x, size, keys, r=2, protected=1)
    assert merged.shape == (2, 7, 4) and new_size.shape == (2, 7, 1)
    assert torch.allclose(merged[:, 0], x[:, 0]) and torch.allclose(new_size[:, 0], size[:, 0])
    # mass (size-weighted sum) and total size are conserved
    assert torch.allclose((merged * new_size).sum(1), (x * size).sum(1), atol=1e-5)
    assert torch.allclose(new_size.sum(1), size.sum(1))
    # at most half the unprotected tokens merge
    merged, _ = tome.merge_tokens(x, None, keys, r=100, protected=1)
    assert merged.shape[1] == 9 - 4


def test_tome_merges_identical_tokens_first() -> None:
    x = torch.tensor([[[9.0, 9.0], [1.0, 0.0], [1.0, 0.01], [0.0, 1.0], [-1.0, 0.5]]])
    merged, size = tome.merge_tokens(x, None, x, r=1, protected=1)
    assert merged.shape == (1, 4, 2)
    assert sorted(size.flatten().tolist()) == [1.0, 1.0, 1.0, 2.0]
    assert torch.allclose(merged[0, 0], x[0, 0])


def test_cpu_padding_is_masked() -> None:
    model = build_vit(VitConfig()).eval()
    blk = model.backbone.blocks[0]
    x = torch.randn(2, 61, 64)
    with torch.no_grad():
        padded, _ = tome.attention_with_keys(blk.attn, x, None, want_keys=False)
        assert tome.cpu_pad(61, x.device) == 3
        assert torch.allclose(padded, blk.attn(x), atol=1e-5)


def test_fusion_subsets_shorten_the_sequence() -> None:
    cfg = FusionConfig()
    model = build_fusion(cfg).eval()
    batch, _ = fusion_tensors("val", cfg)
    batch = {k: v[:2] for k, v in batch.items()}
    lengths = {s: model.tokens(batch, s)[0].shape[1] for s in SUBSETS}
    full = lengths[multimodal.MODALITIES]
    for subset, n in lengths.items():
        if subset != multimodal.MODALITIES:
            assert n < full
    assert lengths[("audio",)] > lengths[("image",)] > lengths[("text",)]


def test_fusion_text_padding_is_masked() -> None:
    cfg = FusionConfig()
    model = build_fusion(cfg).eval()
    batch, _ = fusion_tensors("val", cfg)
    one = {k: v[:1] for k, v in batch.items()}
    padded = dict(one)
    padded["text"] = torch.cat([one["text"], torch.zeros(1, 3, dtype=torch.long)], dim=1)
    with torch.no_grad():
        assert torch.allclose(model(one, multimodal.MODALITIES),
                              model(padded, multimodal.MODALITIES), atol=1e-5)


def test_splits_are_disjoint_stratified_and_deterministic() -> None:
    cfg = data.DataConfig()
    idx = data.split_indices(cfg)
    sets = [set(v.tolist()) for v in idx.values()]
    assert sum(len(s) for s in sets) == 1797 and len(set.union(*sets)) == 1797
    assert 0.58 < len(idx["train"]) / 1797 < 0.62
    a, la = data.image_split("test", cfg)
    b, lb = data.image_split("test", cfg)
    assert torch.equal(a, b) and torch.equal(la, lb)
    assert len(la) == cfg.test_views * len(idx["test"])
    assert torch.bincount(la).min() > 0.8 * torch.bincount(la).max()
    e0, _ = data.image_split("train", cfg, epoch=0)
    e1, _ = data.image_split("train", cfg, epoch=1)
    assert not torch.equal(e0, e1)


def test_task_labels() -> None:
    digits = torch.arange(10)
    assert data.task_labels("parity", digits).tolist() == [0, 1] * 5
    assert data.task_labels("loops", digits).tolist() == [1, 0, 0, 0, 0, 0, 1, 0, 1, 1]


def test_multimodal_views_come_from_pixels() -> None:
    cfg = multimodal.MultimodalConfig()
    view = torch.zeros(16, 16, dtype=torch.uint8)
    view[:8, :8] = 255
    gen = torch.Generator().manual_seed(0)
    clean = multimodal.MultimodalConfig(text_flip_prob=0.0)
    text = multimodal.describe(view, gen, clean)
    assert text.startswith("top-left high top-right low bottom-left low bottom-right low")
    assert all(w in multimodal.VOCAB for w in text.split())
    mm = multimodal.multimodal_split("val", cfg)
    assert mm.image.shape[1:] == (8, 16) and mm.audio.shape[1:] == (512,)
    assert len(mm.text) == len(mm.labels)


def test_family_members_grow() -> None:
    model = build_family(FamilyConfig())
    sizes = [sum(p.numel() for p in model.members[m.replace("-", "_")].parameters())
             for m in MEMBERS]
    assert sizes[0] < sizes[1]
    assert sizes[2] < sizes[3] < sizes[4] < sizes[5]


def test_ladder_shape(servables: dict[str, ServableModel]) -> None:
    """The ladder's cost rule, as a replica runs it (one thread, batch 1): the cheapest rung
    costs <= 1/8 of the dearest (the RAMSIS paper's ladder spans 16x). The dearest's absolute
    cost beside the serving path is the family-shapes record's (machine-dependent)."""
    import time

    model = servables["ladder"]
    item = model.decode(model.examples("val", "digits", limit=1)[0].inputs, "digits")

    def batch1_ms(variant: Variant) -> float:
        """The fastest of 7 timed calls after 2 warm-up calls (the least disturbed by other
        processes on a shared machine)."""
        times = []
        for _ in range(9):
            start = time.perf_counter()
            model.run(variant, "digits", [item])
            times.append(time.perf_counter() - start)
        return min(times[2:]) * 1e3

    import torch

    cheapest, dearest = model.variants()[0], model.variants()[-1]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a replica runs it
    try:
        assert batch1_ms(dearest) >= 8 * batch1_ms(cheapest)
    finally:
        torch.set_num_threads(threads)


def test_scene_fusion_variants_read_only_their_modalities(
        servables: dict[str, ServableModel]) -> None:
    model = servables["scenefusion"]
    example = model.examples("val", "digits", limit=1)[0].inputs
    item = model.decode(example, "digits")
    other = dict(item, audio=torch.randn(512), text=torch.tensor([2, 3, 4]))
    by_name = {v.name: v for v in model.variants()}
    image_only = by_name["scenefusion/image"]
    assert model.run(image_only, "digits", [item]) == model.run(image_only, "digits", [other])
    everything = by_name["scenefusion/image+audio+text"]
    assert model.run(everything, "digits", [item]) != model.run(everything, "digits", [other])


def test_sonified_columns_play_in_their_own_samples() -> None:
    from deployments.models.scene_fusion import COLUMN_SAMPLES, sonify

    views = torch.zeros(1, 16, 16, dtype=torch.uint8)
    views[0, 3, 5] = 255  # one inked pixel: row 3, column 5
    wave = sonify(views, torch.Generator().manual_seed(0), noise=0.0)[0]
    start = 5 * COLUMN_SAMPLES
    assert wave[start:start + COLUMN_SAMPLES].abs().max() > 0.1
    assert float(wave[:start].abs().max()) == 0.0 and float(wave[start + COLUMN_SAMPLES:].abs().max()) == 0.0


def _per_item_ms(model: ServableModel, variant: Variant, items: list[dict[str, torch.Tensor]]
                 ) -> float:
    """The fastest of 7 timed calls after 2 warm-up calls, per item (the least disturbed by other
    processes on a shared machine)."""
    import time

    times = []
    for _ in range(9):
        start = time.perf_counter()
        model.run(variant, "digits", items)
        times.append(time.perf_counter() - start)
    return min(times[2:]) * 1e3 / len(items)


def test_scene_fusion_shape(servables: dict[str, ServableModel]) -> None:
    """The cost rule the scenes fusion was sized by (`python -m bench family-shapes --trained
    scenefusion` records it): its dearest single modality >= 3x its cheapest at batch 1."""
    fusion = servables["scenefusion"]
    item = fusion.decode(fusion.examples("val", "digits", limit=1)[0].inputs, "digits")
    singles = [v for v in fusion.variants() if len(v.modalities or ()) == 1]
    costs = sorted(_per_item_ms(fusion, v, [item]) for v in singles)
    assert costs[-1] >= 3 * costs[0]


def test_scene_vit_gamma_merges_its_144_tokens(servables: dict[str, ServableModel]) -> None:
    """The trunk's 12x12 map is the ViT's 144 patch tokens (+ the class token); gamma < 0 merges
    |gamma| per block, at most half of them (ToMe), so the most-merged setting runs most blocks
    on a few tokens; the forward from the trunk's maps (how training and evaluation run it) is
    the served forward."""
    model = servables["scenevit"].model  # type: ignore[attr-defined]
    x = torch.rand(2, 1, 96, 96)
    with torch.inference_mode():
        _, full = model.features(x, "digits", 0)
        _, merged = model.features(x, "digits", -72)
        direct = model(x, "digits", -24)
        feats, _ = model.through_blocks(model.tokens_from_trunk(model.trunk(x)), "digits", -24)
        via_maps = model.heads[model.head_key("digits", -24)](feats)
    assert full == [145] * (SceneVitConfig().depth + 1)
    assert merged[:4] == [145, 73, 37, 19] and merged[-1] < 8
    assert torch.allclose(direct, via_maps, atol=1e-5)
