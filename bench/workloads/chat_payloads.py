"""The VLM's held-out material as OpenAI chat bodies (the same bytes to every system).

The model directory is the shipped config's (`deployments/models/vlm`, trained by `ensure_vlm`;
this module never trains). Test images are rendered as the model card's evaluation renders them
and sent as PNG data URLs, image parts first (the chat template's order), earlier turns as
user/assistant text messages. Token bounds come from the model's own tokenizer and template.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.sim.traces.chat_spec import ContextShape
from bench.workloads.chat import ExamplePool, GenRequest
from deployments.ingress.chat.schemas import TTFT_HEADER


@dataclass(frozen=True)
class ModelSetup:
    model_dir: Path
    context_len: int
    tokens_per_image: int
    max_images: int
    pool: ExamplePool
    shape: ContextShape


def trained_model_dir(models_dir: Path) -> Path:
    """The shipped VLM's directory; an error (not a training run) when it is not there."""
    from deployments.models.vlm.cache import is_current, model_dir_for
    from deployments.models.vlm.config import VlmConfig

    cfg = VlmConfig()
    path = model_dir_for(cfg, models_dir)
    if not is_current(path, cfg):
        raise FileNotFoundError(f"no trained VLM at {path}: train it first (ensure_vlm, "
                                "python -m bench vlm-card); this benchmark does not train")
    return path.resolve()


def _digit_words() -> tuple[str, ...]:
    from deployments.models.vlm.config import VlmConfig
    from deployments.models.vlm.data import digit_splits
    from deployments.models.vlm.tokenizer import number_word

    labels = digit_splits(VlmConfig().data)["test"].labels.tolist()
    return tuple(number_word(int(x)) for x in labels)


def example_pool() -> ExamplePool:
    from deployments.models.vlm.config import VlmConfig
    from deployments.models.vlm.data import test_examples
    from deployments.models.vlm.prompts import QUESTIONS

    facts = tuple((e.text, e.answer) for e in test_examples(VlmConfig().data)["arithmetic"])
    return ExamplePool(_digit_words(), facts, QUESTIONS["digit"], QUESTIONS["sequence"])


def model_shape(model_dir: Path, pool: ExamplePool, context_len: int) -> ContextShape:
    """Upper bounds, counted with the model's tokenizer and chat template: a one-turn prompt
    without images, the prompt cost of one image (its image tokens and the template's words
    around it) and of one earlier (question, answer) turn."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    per_image = int(json.loads((model_dir / "config.json").read_text())["image_seq_length"])

    def count(messages: list[dict[str, Any]]) -> int:
        ids: Any = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        return len(ids["input_ids"] if hasattr(ids, "keys") else ids)

    questions = [q for q, _ in pool.facts] + [pool.digit_question, pool.sequence_question]
    base = max(count(_user(q, 0)) for q in questions)
    eight = count(_user(pool.sequence_question, 8)) - count(_user(pool.sequence_question, 0))
    image_cost = -(-eight // 8) + per_image - 1  # the placeholder counted once by the tokenizer
    last = _user("x", 0)
    turn = max(count([{"role": "user", "content": q}, {"role": "assistant", "content": a},
                      *last]) for q, a in pool.facts) - count(last)
    return ContextShape(context_len, image_cost, base, turn)


def _user(text: str, num_images: int) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "image"} for _ in range(num_images)]
    parts.append({"type": "text", "text": text})
    return [{"role": "user", "content": parts}]


def model_setup(models_dir: Path, model_dir: Path | None = None) -> ModelSetup:
    """The shipped, trained VLM; `model_dir`: another directory of the same layout (held-out
    examples still come from the shipped config's data)."""
    model_dir = trained_model_dir(models_dir) if model_dir is None else model_dir.resolve()
    cfg = json.loads((model_dir / "config.json").read_text())
    context = int(cfg["text_config"].get("max_position_embeddings", 2048))
    pool = example_pool()
    shape = model_shape(model_dir, pool, context)
    from deployments.models.vlm.config import VlmConfig

    per_image = int(cfg["image_seq_length"])
    return ModelSetup(model_dir, context, per_image, VlmConfig().data.max_images, pool, shape)


class ImageUrls:
    """PNG data URLs of the test images, rendered once each (as the model card's evaluation
    renders them: deployments/models/vlm/data.py)."""

    def __init__(self, size_px: int) -> None:
        from deployments.models.vlm.config import VlmConfig
        from deployments.models.vlm.data import digit_splits, render

        spec = VlmConfig().data
        self._images = render(digit_splits(spec)["test"].images, size_px, spec)
        self._urls: dict[int, str] = {}

    def url(self, image_id: int) -> str:
        if image_id not in self._urls:
            from deployments.models.vlm.data import to_pil

            buf = io.BytesIO()
            to_pil(self._images[image_id]).save(buf, format="PNG")
            self._urls[image_id] = ("data:image/png;base64,"
                                    + base64.b64encode(buf.getvalue()).decode())
        return self._urls[image_id]


def messages(req: GenRequest, urls: ImageUrls) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for question, answer in req.history:
        out += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": urls.url(i)}}
                                   for i in req.image_ids]
    parts.append({"type": "text", "text": req.question})
    out.append({"role": "user", "content": parts})
    return out


def body(req: GenRequest, urls: ImageUrls, model: str) -> bytes:
    """A streaming, greedy chat completion with a usage chunk (what every system is sent)."""
    return json.dumps({"model": model, "messages": messages(req, urls), "stream": True,
                       "stream_options": {"include_usage": True}, "temperature": 0,
                       "max_tokens": req.max_tokens}).encode()


def headers(slo_ms: float) -> dict[str, str]:
    """Our TTFT SLO header (other servers ignore it); the SLO is the same for every system."""
    return {"Content-Type": "application/json", TTFT_HEADER: f"{slo_ms:g}"}


def image_size_px(model_dir: Path) -> int:
    return int(json.loads((model_dir / "config.json").read_text())["vision_config"]["image_size"])
