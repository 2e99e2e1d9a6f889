"""The ingress's prompt files (app/chat_graph.py `prompt_files`): the model directory's small
files only, and a chat template override replacing the model's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.chat_graph import prompt_files
from deployments.generation.model_files import ModelFiles
from deployments.generation.prompt import PromptRenderer
from tests.helpers.chat_renderer import prompt_model_files, tokenizer_and_renderer


def test_an_override_replaces_the_models_template(tmp_path: Path) -> None:
    tok, _ = tokenizer_and_renderer(tmp_path / "model")
    saved = prompt_model_files(tmp_path / "model", tok)
    files = ModelFiles("vlm", "x", {**saved.files, "model.safetensors": b"weights"})
    plain = prompt_files(files, None)
    assert "model.safetensors" not in plain.files  # the weights never reach the ingress
    template = tmp_path / "mine.jinja"
    template.write_text("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}"
                        "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    mine = PromptRenderer(prompt_files(files, template))
    assert mine.render([{"role": "user", "content": "hi"}]) == "<user>hi<assistant>"
    assert PromptRenderer(plain).render([{"role": "user", "content": "hi"}]) != (
        "<user>hi<assistant>")


def test_a_missing_template_fails_naming_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="generation.chat_template '/nowhere/t.jinja'"):
        prompt_files(ModelFiles("vlm", "x", {}), Path("/nowhere/t.jinja"))
