"""The shape rules `python -m bench family-shapes` judges candidate ladders by
(bench/experiments/families/shapes.py): the dearest >= 3x the path's CPU per request, the
cheapest <= 1/8 of the dearest."""

from __future__ import annotations

from bench.experiments.families.shapes import ladders, modality_checks


def row(name: str, forward_ms: float, train_ms: float = 1.0) -> dict[str, object]:
    return {"name": name, "forward_ms": forward_ms, "train_ms_per_image": train_ms}


def test_only_pairs_meeting_both_rules_cheapest_to_train_first() -> None:
    rows = [row("tiny", 3.0), row("small", 7.0), row("mid", 30.0, 10.0),
            row("big", 50.0, 37.0), row("huge", 64.0, 60.0)]
    found = ladders(rows, path_ms=16.0)
    # mid (30 ms) is under 3 x 16 ms; small (7 ms) is over 1/8 of big (6.25 ms) but not of huge
    assert [(r["cheapest"], r["dearest"]) for r in found] == [
        ("tiny", "big"), ("tiny", "huge"), ("small", "huge")]
    assert found[0]["spread"] == round(50.0 / 3.0, 1)
    assert ladders(rows, path_ms=30.0) == []  # nothing is 3x a 30 ms path


def test_the_modality_rule_compares_single_modalities_only() -> None:
    """Dearest single modality >= 3x the cheapest; combinations do not count."""
    rows = [{"forward_ms": 17.0, "modalities": ["image"]},
            {"forward_ms": 6.0, "modalities": ["audio"]},
            {"forward_ms": 0.3, "modalities": ["audio", "text"]}]  # cheap, but a combination
    (check,) = modality_checks(rows)
    assert check.value == round(17.0 / 6.0, 1) and not check.ok
    (check,) = modality_checks([*rows, {"forward_ms": 0.5, "modalities": ["text"]}])
    assert check.value == 34.0 and check.ok
