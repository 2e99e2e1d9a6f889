"""The VLM's tokenizer (deployments/models/vlm/tokenizer.py): byte-level BPE over the task
words, special tokens, and the chat template the model was trained on."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from deployments.models.vlm.prompts import messages, prompt_ids, prompt_text
from deployments.models.vlm.tokenizer import (
    IMAGE,
    NUMBER_WORDS,
    SPECIAL_TOKENS,
    TASK_WORDS,
    build_tokenizer,
    number_word,
)


@pytest.fixture(scope="module")
def tok():  # type: ignore[no-untyped-def]
    return build_tokenizer()


def test_special_tokens_have_fixed_ids(tok) -> None:  # type: ignore[no-untyped-def]
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    assert tok("x<image><image>y", add_special_tokens=False).input_ids[1:3] == [3, 3]


def test_every_task_word_is_one_token(tok) -> None:  # type: ignore[no-untyped-def]
    for word in NUMBER_WORDS + TASK_WORDS:
        assert len(tok(" " + word, add_special_tokens=False).input_ids) == 1, word


@pytest.mark.parametrize("text", [" three one four", "what is two plus three?",
                                  "héllo, wörld 123 \t!", "unknownword zebra"])
def test_round_trip(tok, text: str) -> None:  # type: ignore[no-untyped-def]
    ids = tok(text, add_special_tokens=False).input_ids
    assert tok.decode(ids) == text


def test_no_special_tokens_added_implicitly(tok) -> None:  # type: ignore[no-untyped-def]
    assert tok("seven", add_special_tokens=True).input_ids == \
        tok("seven", add_special_tokens=False).input_ids


def test_build_is_deterministic(tok) -> None:  # type: ignore[no-untyped-def]
    assert build_tokenizer().backend_tokenizer.to_str() == tok.backend_tokenizer.to_str()


def test_template_numbers_images_in_order(tok) -> None:  # type: ignore[no-untyped-def]
    assert prompt_text(tok, "read the digits", 3) == (
        "<bos>user:<image> image one<image> image two<image> image three read the digits"
        "\nassistant:")
    assert prompt_text(tok, "what is two plus three?", 0) == \
        "<bos>user: what is two plus three?\nassistant:"


def test_template_turns_and_string_content(tok) -> None:  # type: ignore[no-untyped-def]
    chat = [*messages("which digit is this?", 1), {"role": "assistant", "content": "seven"},
            {"role": "user", "content": "what is one plus one?"}]
    rendered = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
    assert rendered == ("<bos>user:<image> image one which digit is this?\n"
                        "assistant: seven<eos>\nuser: what is one plus one?\nassistant:")
    no_prompt = tok.apply_chat_template(chat[:2], tokenize=False)
    assert no_prompt.endswith("assistant: seven<eos>\n")


def test_saved_tokenizer_loads_the_same(tok, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = prompt_text(tok, "read the digits", 2)
    assert prompt_text(loaded, "read the digits", 2) == text
    assert loaded(text, add_special_tokens=False).input_ids == \
        tok(text, add_special_tokens=False).input_ids
    assert loaded.convert_tokens_to_ids(IMAGE) == 3


def test_prompt_ids_expand_each_image(tok) -> None:  # type: ignore[no-untyped-def]
    ids = prompt_ids(tok, "read the digits", 3, tokens_per_image=16)
    assert ids.count(3) == 48
    assert len(ids) == len(tok(prompt_text(tok, "read the digits", 3),
                               add_special_tokens=False).input_ids) + 3 * 15


def test_number_word_range() -> None:
    assert number_word(0) == "zero" and number_word(20) == "twenty"
    with pytest.raises(ValueError, match="0..20"):
        number_word(21)
