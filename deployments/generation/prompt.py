"""Chat messages -> the model's prompt text and its token count, in the ingress (no torch, no
transformers): the model directory's own chat template (jinja2, sandboxed, as transformers
renders it) and its `tokenizer.json` through `tokenizers`. The counts decide "prompt longer than
the context" before any stage is called, and are the routers' token costs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from deployments.engines.architectures import model_facts
from deployments.generation.model_files import ModelFiles


@dataclass(frozen=True)
class PromptFacts:
    image_token: str  # "": the model takes no images
    image_token_id: int | None
    tokens_per_image: int


class PromptRenderer:
    def __init__(self, model: ModelFiles) -> None:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        from tokenizers import Tokenizer

        files = model.files
        cfg = json.loads(files["config.json"])
        tok_cfg = json.loads(files.get("tokenizer_config.json", b"{}"))
        source = files.get("chat_template.jinja", b"").decode() or tok_cfg.get("chat_template")
        if not source:
            raise ValueError(f"model {model.name} has no chat template")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        self._template = env.from_string(source)
        self._tokenizer = Tokenizer.from_str(files["tokenizer.json"].decode())
        self.specials = {k: _content(tok_cfg.get(k)) for k in ("bos_token", "eos_token", "pad_token")}
        facts = model_facts(cfg, f"model {model.name}: config.json")
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

    def count(self, prompt: str, num_images: int) -> int:
        """Prompt tokens with every image placeholder expanded (what the engines count)."""
        ids = self._tokenizer.encode(prompt, add_special_tokens=False).ids
        image_id = self.facts.image_token_id
        found = 0 if image_id is None else sum(1 for t in ids if t == image_id)
        if found != num_images:
            raise ValueError(f"the prompt holds {found} image placeholders for {num_images} "
                             "images (an image placeholder typed in the text?)")
        return len(ids) + num_images * (self.facts.tokens_per_image - 1)


def _raise(message: str) -> None:
    raise ValueError(message)


def _content(token: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string or an AddedToken dict."""
    return token.get("content") if isinstance(token, dict) else token
