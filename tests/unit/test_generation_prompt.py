"""The ingress renders and counts prompts without transformers: the same text as the
tokenizer's own `apply_chat_template`, the same count as the engines."""

from __future__ import annotations

import pytest

from deployments.generation.prompt import PromptRenderer

MESSAGES = [{"role": "system", "content": [{"type": "text", "text": "be brief"}]},
            {"role": "user", "content": [{"type": "image"}, {"type": "image"},
                                         {"type": "text", "text": "read the digits"}]}]


def test_render_matches_transformers(both: tuple[object, PromptRenderer]) -> None:
    tok, renderer = both
    ours = renderer.render(MESSAGES)
    theirs = tok.apply_chat_template(MESSAGES, tokenize=False,  # type: ignore[attr-defined]
                                     add_generation_prompt=True)
    assert ours == theirs
    assert ours.count(renderer.facts.image_token) == 2


def test_count_expands_images(both: tuple[object, PromptRenderer]) -> None:
    tok, renderer = both
    prompt = renderer.render(MESSAGES)
    ids = tok(prompt, add_special_tokens=False).input_ids  # type: ignore[operator]
    assert renderer.count(prompt, (64, 64)) == len(ids) + 2 * 63
    assert renderer.tokens_for(500, 20) == 64  # LLaVA: fixed, whatever the size
    with pytest.raises(ValueError, match="2 image placeholders for 1"):
        renderer.count(prompt, (64,))
