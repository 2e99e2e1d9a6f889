"""`/v1/chat/completions` on the real app (the session's Serve, tests/integration/conftest.py),
through the official `openai` client: held-out digits, several images in order, text only,
streaming with usage, and bad input answered with a clear 4xx while the server keeps serving.

The app serves the session's `vlm_dir` (tests/conftest.py): the tiny VLM in CI, so everything
here but the held-out accuracy runs on every submission; the accuracy test takes
`trained_vlm_dir` and runs where the trained VLM is cached (then it is the one served)."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import CHAT_MODEL, Server

pytestmark = pytest.mark.integration
openai = pytest.importorskip("openai")


def data_url(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode()


def held_out(limit: int) -> dict[str, list[tuple[str, list[bytes], str]]]:
    """Per task, (question, PNGs in order, expected answer) of the VLM's held-out set."""
    from PIL import Image

    from deployments.models.vlm.config import VlmConfig
    from deployments.models.vlm.data import digit_splits, render, test_examples

    cfg = VlmConfig()
    splits = digit_splits(cfg.data)
    pixels = render(splits["test"].images, cfg.vision.image_size_px, cfg.data)

    def png(i: int) -> bytes:
        buf = io.BytesIO()
        Image.fromarray(pixels[i].numpy(), mode="L").save(buf, format="PNG")
        return buf.getvalue()

    return {task: [(e.text, [png(i) for i in e.image_ids], e.answer) for e in ex[:limit]]
            for task, ex in test_examples(cfg.data, splits).items()}


def message(text: str, pngs: list[bytes]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": data_url(p)}}
                                   for p in pngs]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}]


@pytest.fixture(scope="module")
def client(server: Server) -> Any:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0,
                         timeout=60.0)


@pytest.fixture(scope="module")
def examples() -> dict[str, list[tuple[str, list[bytes], str]]]:
    return held_out(12)


def ask(client: Any, text: str, pngs: list[bytes], **kw: Any) -> Any:
    """Greedy unless `kw` says otherwise."""
    return client.chat.completions.create(model=CHAT_MODEL, messages=message(text, pngs),
                                          max_tokens=12, **{"temperature": 0, **kw})


def test_models_list_the_vlm(client: Any) -> None:
    assert CHAT_MODEL in [m.id for m in client.models.list().data]


# well above chance (the model card has the held-out accuracy on the whole test set; 12 examples
# a task here)
FLOOR = {"digit": 0.75, "sequence": 0.5, "arithmetic": 0.3}


@pytest.mark.parametrize("task", ["digit", "sequence", "arithmetic"])
def test_held_out_requests_are_answered_and_counted(client: Any, examples: Any, task: str,
                                                    vlm_dir: Path) -> None:
    """Whatever the model: every request finishes, its prompt counts the rendered prompt's
    tokens with each image's tokens expanded (the served model's own tokenizer), and its
    completion stays within max_tokens, all of them when it stopped for length."""
    from transformers import AutoTokenizer

    from deployments.models.vlm.prompts import prompt_text

    per_image = json.loads((vlm_dir / "config.json").read_text())["image_seq_length"]
    tok = AutoTokenizer.from_pretrained(vlm_dir)
    for text, pngs, _ in examples[task]:
        out = ask(client, text, pngs)
        assert out.choices[0].finish_reason in ("stop", "length")
        rendered = tok(prompt_text(tok, text, len(pngs)), add_special_tokens=False)["input_ids"]
        # each image's placeholder stands for its `per_image` tokens
        assert out.usage.prompt_tokens == len(rendered) + len(pngs) * (per_image - 1)
        assert 1 <= out.usage.completion_tokens <= 12  # max_tokens
        if out.choices[0].finish_reason == "length":
            assert out.usage.completion_tokens == 12
        assert out.usage.total_tokens == out.usage.prompt_tokens + out.usage.completion_tokens


@pytest.mark.parametrize("task", ["digit", "sequence", "arithmetic"])
def test_held_out_answers(client: Any, examples: Any, task: str, trained_vlm_dir: Any) -> None:
    """The trained VLM (served where it is cached) answers the held-out examples."""
    right = 0
    for text, pngs, answer in examples[task]:
        right += ask(client, text, pngs).choices[0].message.content.strip() == answer
    assert right >= FLOOR[task] * len(examples[task]), (task, right)


def test_streaming_with_usage(client: Any, examples: Any) -> None:
    text, pngs, answer = examples["sequence"][0]
    stream = ask(client, text, pngs, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens >= 1
    whole = ask(client, text, pngs)
    assert content == whole.choices[0].message.content  # greedy: the same answer


@pytest.mark.parametrize("content, status, code", [
    ([{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}], 400,
     "remote_url_not_supported"),
    ([{"type": "image_url", "image_url": {"url": "data:image/png;base64,!!!"}}], 400,
     "invalid_base64"),
    ([{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}], 400,
     "unsupported_content_part"),
])
def test_bad_input_is_a_clear_4xx(server: Server, content: Any, status: int, code: str) -> None:
    body = {"model": CHAT_MODEL, "messages": [{"role": "user", "content": content}]}
    r = server.post("/v1/chat/completions", body)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code


def test_a_standard_clients_sampling_is_served(client: Any, examples: Any) -> None:
    """What LangChain's ChatOpenAI and the OpenAI SDK send by default (temperature 0.7, top_p)
    is served; the same seed gives the same answer; a stop sequence found in the greedy answer
    ends it there (finish reason "stop")."""
    text, pngs, _ = examples["sequence"][0]
    kw = {"temperature": 0.7, "top_p": 0.95, "seed": 1234}
    first, again = ask(client, text, pngs, **kw), ask(client, text, pngs, **kw)
    assert first.choices[0].message.content == again.choices[0].message.content
    assert first.choices[0].finish_reason in ("stop", "length")
    greedy = client.chat.completions.create(
        model=CHAT_MODEL, messages=message(text, pngs), max_tokens=12,
        extra_body={"ignore_eos": True}).choices[0].message.content
    stop = greedy[len(greedy) // 2:len(greedy) // 2 + 1]
    cut = client.chat.completions.create(
        model=CHAT_MODEL, messages=message(text, pngs), max_tokens=12, stop=[stop],
        extra_body={"ignore_eos": True}).choices[0]
    assert (cut.message.content, cut.finish_reason) == (greedy[:greedy.find(stop)], "stop")


def test_unknown_model_and_too_many_images(server: Server, examples: Any) -> None:
    r = server.post("/v1/chat/completions", {"model": "nope", "messages": [
        {"role": "user", "content": "hi"}]})
    assert r.status_code == 404 and CHAT_MODEL in r.json()["error"]["message"]
    pngs = examples["digit"][0][1] * 9
    r = server.post("/v1/chat/completions", {"model": CHAT_MODEL,
                                             "messages": message("read the digits", pngs)})
    assert r.status_code == 400 and r.json()["error"]["code"] == "too_many_images"
    r = server.post("/v1/chat/completions", raw=b"{not json")
    assert r.status_code == 400


def test_server_still_answers_after_bad_input(client: Any, examples: Any) -> None:
    text, pngs, _ = examples["digit"][0]
    assert ask(client, text, pngs).choices[0].message.content


def test_metrics_show_where_a_chat_requests_time_went(server: Server, client: Any,
                                                      examples: Any) -> None:
    from bench.experiments.generation_systems.metrics import stage_totals

    before = stage_totals(server.get("/metrics").text)
    text, pngs, _ = examples["digit"][0]
    assert ask(client, text, pngs).choices[0].message.content
    after = stage_totals(server.get("/metrics").text)
    entries = server.get("/v1/models").json()["data"]
    kind = next(m for m in entries if m["id"] == CHAT_MODEL)["adaptserve"]["path"]
    stages = ["first_chunk"] + (["encode", "encoder_busy"] if kind == "disaggregated" else [])
    for stage in stages:
        key = f"{kind}/{stage}"
        assert after[key][1] == before.get(key, (0.0, 0.0))[1] + 1, (key, before, after)
        assert after[key][0] > before.get(key, (0.0, 0.0))[0]
