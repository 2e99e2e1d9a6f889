"""Chat messages -> the model's prompt text and its token count, in the ingress (no torch, no
transformers): the model directory's own chat template (jinja2, sandboxed, as transformers
renders it) and its `tokenizer.json` through `tokenizers`, read from the directory's path on the
ingress's node. The counts decide "prompt longer than the context" before any stage is called,
and are the routers' token costs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from deployments.generation.model_files import ModelDir


@dataclass(frozen=True)
class PromptFacts:
    image_token: str  # "": the model takes no images
    image_token_id: int | None
    tokens_per_image: int


class PromptRenderer:
    def __init__(self, model: ModelDir, chat_template: str | None = None) -> None:
        """The model directory's config, tokenizer and chat template, read from its path;
        `chat_template`: a template's source replacing the model's own."""
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        from tokenizers import Tokenizer

        tok_cfg_file = model.file("tokenizer_config.json")
        tok_cfg = json.loads(tok_cfg_file.read_bytes()) if tok_cfg_file.is_file() else {}
        own_file = model.file("chat_template.jinja")
        source = (chat_template or (own_file.read_text() if own_file.is_file() else "")
                  or tok_cfg.get("chat_template"))
        if not source:
            raise ValueError(f"model {model.name} has no chat template ({model.path})")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        self._template = env.from_string(source)
        self._tokenizer = Tokenizer.from_str(model.file("tokenizer.json").read_text())
        self.specials = {k: _content(tok_cfg.get(k)) for k in ("bos_token", "eos_token", "pad_token")}
        facts = model.facts()
        self.tokens_for = facts.tokens_for  # (width, height) -> one image's tokens
        image_id = facts.image_token_id
        token = "" if image_id is None else self._tokenizer.id_to_token(image_id)
        if token is None:
            raise ValueError(f"model {model.name}: image token id {image_id} not in the vocabulary")
        self.facts = PromptFacts(token, image_id, facts.tokens_per_image)

    def render(self, messages: list[dict[str, Any]]) -> str:
        """`messages` as transformers' apply_chat_template takes them (image parts as
        {"type": "image"}), with the generation prompt."""
        return self._template.render(messages=messages, add_generation_prompt=True,
                                     **self.specials)

    def count(self, prompt: str, image_tokens: Sequence[int]) -> int:
        """Prompt tokens with every image placeholder expanded to its image's tokens
        (`image_tokens`, one count per image: `tokens_for`; what the engines count)."""
        ids = self._tokenizer.encode(prompt, add_special_tokens=False).ids
        image_id = self.facts.image_token_id
        found = 0 if image_id is None else sum(1 for t in ids if t == image_id)
        if found != len(image_tokens):
            raise ValueError(f"the prompt holds {found} image placeholders for "
                             f"{len(image_tokens)} images (an image placeholder typed in the "
                             "text?)")
        return len(ids) + sum(image_tokens) - len(image_tokens)


def _raise(message: str) -> None:
    raise ValueError(message)


def _content(token: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    return token.get("content") if isinstance(token, dict) else token
