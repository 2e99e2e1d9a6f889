"""The VLM's data (deployments/models/vlm/data.py): deterministic, disjoint splits, answers
that match the digits, renderings the saved image processor reproduces exactly."""

from __future__ import annotations

import pytest
import torch

from deployments.models.vlm import data
from deployments.models.vlm.config import DataSpec, VlmConfig
from deployments.models.vlm.model import image_processor, pixel_values
from deployments.models.vlm.prompts import IGNORE_INDEX, training_batch
from deployments.models.vlm.tokenizer import NUMBER_WORDS, build_tokenizer

SPEC = DataSpec()


@pytest.fixture(scope="module")
def splits() -> dict[str, data.DigitSplit]:
    return data.digit_splits(SPEC)


def _ids(split: data.DigitSplit) -> set[bytes]:
    return {img.numpy().tobytes() for img in split.images}


def test_splits_are_disjoint_complete_and_stratified(splits: dict[str, data.DigitSplit],
                                                     ) -> None:
    n_train, n_test = len(splits["train"].labels), len(splits["test"].labels)
    assert (n_train, n_test) == (1437, 360)
    # no test image (by content) is a training image
    assert not _ids(splits["train"]) & _ids(splits["test"])
    assert torch.bincount(splits["test"].labels).min() >= 35


def test_splits_are_deterministic(splits: dict[str, data.DigitSplit]) -> None:
    again = data.digit_splits(SPEC)
    assert torch.equal(again["test"].images, splits["test"].images)
    assert torch.equal(again["train"].labels, splits["train"].labels)
    other = data.digit_splits(DataSpec(seed=1))
    assert not torch.equal(other["test"].labels, splits["test"].labels)


def test_held_out_examples(splits: dict[str, data.DigitSplit]) -> None:
    tests = data.test_examples(SPEC, splits)
    assert tests == data.test_examples(SPEC)
    labels = splits["test"].labels.tolist()
    assert [e.answer for e in tests["digit"]] == [NUMBER_WORDS[d] for d in labels]
    seqs = tests["sequence"]
    assert len(seqs) == SPEC.multi_test_requests
    assert {len(e.image_ids) for e in seqs} == set(range(1, SPEC.max_images + 1))
    for e in seqs:
        assert e.answer.split() == [NUMBER_WORDS[labels[i]] for i in e.image_ids]
        assert len(set(e.image_ids)) == len(e.image_ids)


def _value(text: str) -> int:
    _, _, a, op, b = text.rstrip("?").split()
    x, y = NUMBER_WORDS.index(a), NUMBER_WORDS.index(b)
    return x + y if op == "plus" else x - y


def test_arithmetic_facts() -> None:
    facts = data.arithmetic_facts(SPEC)
    train, test = facts["train"], facts["test"]
    assert not {e.text for e in train} & {e.text for e in test}
    assert len(train) + len(test) == 2 * 231 and len(test) == 92
    for e in train + test:
        assert NUMBER_WORDS.index(e.answer) == _value(e.text)
        assert 0 <= _value(e.text) <= SPEC.max_number and not e.image_ids


def test_render_clean_and_augmented(splits: dict[str, data.DigitSplit]) -> None:
    src = splits["test"].images[:8]
    clean = data.render(src, 56, SPEC)
    assert clean.shape == (8, 56, 56) and clean.dtype == torch.uint8
    assert torch.equal(clean, data.render(src, 56, SPEC))
    aug1 = data.render(src, 56, SPEC, torch.Generator().manual_seed(3))
    aug2 = data.render(src, 56, SPEC, torch.Generator().manual_seed(3))
    assert torch.equal(aug1, aug2) and not torch.equal(aug1, clean)


def test_processor_reproduces_training_pixels(splits: dict[str, data.DigitSplit]) -> None:
    cfg = VlmConfig()
    images = data.render(splits["test"].images[:4], cfg.vision.image_size_px, cfg.data)
    pil = [data.to_pil(img) for img in images]
    ours = pixel_values(images)
    theirs = image_processor(cfg)(images=pil, return_tensors="pt")["pixel_values"]
    assert theirs.shape == ours.shape
    assert torch.allclose(theirs, ours, atol=1e-6)
    grey = image_processor(cfg)(images=[p.convert("L") for p in pil],
                                return_tensors="pt")["pixel_values"]
    assert torch.allclose(grey, ours, atol=1e-6)


def test_training_batch_labels_only_the_answer() -> None:
    tok = build_tokenizer()
    ids, mask, labels = training_batch(tok, [("read the digits", 2, "three one"),
                                             ("what is one plus one?", 0, "two")], 16)
    assert ids.shape == mask.shape == labels.shape
    answer = [t for t in labels[0].tolist() if t != IGNORE_INDEX]
    assert tok.decode(answer) == " three one<eos>"
    assert (ids[0] == 3).sum() == 32 and (ids[1] == 3).sum() == 0
    assert mask[1].sum() < mask[0].sum() and labels[1, int(mask[1].sum()):].eq(-100).all()
