"""The ingress's prompt files: read from the model directory's path (config, tokenizer, chat
template), and a `generation.chat_template` override (app/chat_graph.py
`chat_template_override`) replacing the model's own template."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.chat_graph import chat_template_override
from deployments.generation.prompt import PromptRenderer
from tests.helpers.chat_renderer import prompt_model_dir, tokenizer_and_renderer


def test_an_override_replaces_the_models_template(tmp_path: Path) -> None:
    tok, plain = tokenizer_and_renderer(tmp_path / "model")
    model = prompt_model_dir(tmp_path / "model", tok)
    template = tmp_path / "mine.jinja"
    template.write_text("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}"
                        "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    mine = PromptRenderer(model, chat_template_override(str(template)))
    assert mine.render([{"role": "user", "content": "hi"}]) == "<user>hi<assistant>"
    assert plain.render([{"role": "user", "content": "hi"}]) != "<user>hi<assistant>"
    assert chat_template_override(None) is None


def test_a_missing_template_fails_naming_it() -> None:
    with pytest.raises(FileNotFoundError, match="generation.chat_template '/nowhere/t.jinja'"):
        chat_template_override("/nowhere/t.jinja")


def test_a_model_directory_without_a_tokenizer_fails_naming_the_file(tmp_path: Path) -> None:
    tok, _ = tokenizer_and_renderer(tmp_path / "model")
    model = prompt_model_dir(tmp_path / "model", tok)
    (tmp_path / "model" / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "model" / "tokenizer.json")):
        PromptRenderer(model)
