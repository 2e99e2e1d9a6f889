"""The chat API's request layer (deployments/ingress/chat/parse.py and its parts): every bad
input of the chat API's list of bad inputs is refused with its status and a message naming the
problem; good requests render through the VLM's own chat template. Images: test_chat_parse_images.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deployments.engines.sampling import Sampling
from deployments.ingress.chat.parse import ContextCheck, parse_chat, template_messages
from deployments.ingress.chat.schemas import TTFT_HEADER, ChatLimits
from tests.helpers.chat_requests import LIMITS, MODELS, PNG, TEXT, body, image_part, refused

# ---- the list of bad inputs ----

@pytest.mark.parametrize("raw", [b'{"model": "vlm", "messages": [', b"\xff\xfe",
                                 b'{"model": "vlm", "messages": [], "max_tokens": NaN}'])
def test_malformed_json(raw: bytes) -> None:
    err = refused(raw)
    assert (err.status, err.code, err.type) == (400, "malformed_json", "invalid_request_error")
    assert "not valid JSON" in err.message


def test_empty_messages() -> None:
    err = refused({"model": "vlm", "messages": []})
    assert (err.status, err.code, err.param) == (400, "empty_messages", "messages")
    assert "at least one message" in err.message


def test_unknown_model_lists_the_valid_ones() -> None:
    err = refused({**body(), "model": "gpt-4o"})
    assert (err.status, err.code, err.param) == (404, "model_not_found", "model")
    assert "'gpt-4o'" in err.message and "['vlm']" in err.message


@pytest.mark.parametrize("part, role, words", [
    ({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}, "user",
     "'input_audio' is not supported in a user message"),
    ({"type": "image", "image": "x"}, "user", "'image' is not supported"),
    ({"text": "no type"}, "user", "None is not supported"),
    (image_part(PNG), "system", "images go in user messages"),
    (image_part(PNG), "assistant", "takes 'text' parts"),
])
def test_unsupported_content_part(part: dict[str, Any], role: str, words: str) -> None:
    raw = {"model": "vlm", "messages": [{"role": role, "content": [part]},
                                        {"role": "user", "content": "hi"}]}
    err = refused(raw)
    assert (err.status, err.code, err.param) == (400, "unsupported_content_part",
                                                 "messages[0].content[0].type")
    assert words in err.message


def counting_context(context_len: int, tokens_per_image: int = 10) -> ContextCheck:
    """A whitespace 'tokenizer' standing for the engine's (the real one: the last test)."""
    return ContextCheck(context_len, lambda p, t: len(p.split()) + sum(t),
                        lambda msgs: json.dumps(msgs), lambda w, h: tokens_per_image,
                        image_placeholder="IMG")


def test_prompt_longer_than_the_context() -> None:
    err = refused(body(image_part(PNG), image_part(PNG), TEXT), context=counting_context(20))
    assert (err.status, err.code, err.param) == (400, "context_length_exceeded", "messages")
    assert "images included" in err.message and "context is 20 tokens" in err.message


def test_prompt_plus_max_tokens_longer_than_the_context() -> None:
    ctx = counting_context(40)
    ok = parse_chat(body(image_part(PNG), TEXT), LIMITS, MODELS, context=ctx)
    room = 40 - (ok.prompt_tokens or 0)
    assert ok.max_tokens == room and ok.prompt is not None and "IMG" in ok.prompt
    err = refused(body(image_part(PNG), TEXT, max_tokens=room + 1), context=ctx)
    assert (err.code, err.param) == ("context_length_exceeded", "max_tokens")
    assert f"at most {room} tokens" in err.message


@pytest.mark.parametrize("fields, param", [
    ({"max_tokens": 0}, "max_tokens"), ({"max_tokens": 257}, "max_tokens"),
    ({"max_completion_tokens": -3}, "max_completion_tokens"),
])
def test_max_tokens_out_of_range(fields: dict[str, Any], param: str) -> None:
    err = refused(body(**fields))
    assert (err.status, err.code, err.param) == (400, "max_tokens_out_of_range", param)
    assert "out of range: 1..256" in err.message


def test_max_tokens_must_be_an_integer() -> None:
    err = refused(body(max_tokens="16"))
    assert (err.status, err.code, err.param) == (400, "invalid_request", "max_tokens")


def test_ttft_slo_below_the_fastest_possible() -> None:
    err = refused(body(slo={"ttft_ms": 5}), min_ttft_ms=12.5)
    assert (err.status, err.code, err.param) == (400, "slo_unachievable", "slo.ttft_ms")
    assert "5 ms is below" in err.message and "at least 13 ms" in err.message
    # the floor may grow with the request's images (a stage profile's function)
    floor = lambda images, tokens: 10.0 + 30.0 * images  # noqa: E731
    assert parse_chat(body(slo={"ttft_ms": 35}), LIMITS, MODELS, min_ttft_ms=floor)
    err = refused(body(image_part(PNG), TEXT, slo={"ttft_ms": 35}), min_ttft_ms=floor)
    assert "(1 images" in err.message and "40.0 ms" in err.message


# ---- the other refusals ----

@pytest.mark.parametrize("fields, code, param, words", [
    ({"logprobs": True}, "unknown_parameter", "logprobs", "unrecognized request argument"),
    ({"n": 2}, "unsupported_value", "n", "one choice"),
    ({"stop": [""]}, "invalid_request", "stop", "empty stop sequence"),
    ({"stop": ["x" * 257]}, "invalid_request", "stop", "1..256 characters"),
    ({"stream_options": {"include_usage": True}}, "invalid_request", "stream_options",
     "only allowed when stream is true"),
    ({"max_tokens": 4, "max_completion_tokens": 5}, "invalid_request",
     "max_completion_tokens", "differ"),
    ({"slo": {"ttft_ms": 0}}, "invalid_slo", "slo.ttft_ms", "greater than 0"),
    ({"stream": "yes"}, "invalid_request", "stream", "valid boolean"),
])
def test_parameters_we_cannot_honour(fields: dict[str, Any], code: str, param: str,
                                     words: str) -> None:
    err = refused(body(**fields))
    assert (err.status, err.code, err.param) == (400, code, param)
    assert words in err.message


@pytest.mark.parametrize("fields, param", [
    ({"temperature": 2.5}, "temperature"), ({"temperature": "0.7"}, "temperature"),
    ({"top_p": 0}, "top_p"), ({"top_k": -2}, "top_k"), ({"presence_penalty": 3}, "presence_penalty"),
    ({"frequency_penalty": -2.5}, "frequency_penalty"), ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"seed": 1.5}, "seed"),
])
def test_sampling_values_out_of_range(fields: dict[str, Any], param: str) -> None:
    err = refused(body(**fields))
    assert (err.status, err.param) == (400, param), err.message


def test_sampling_reaches_the_request_as_asked() -> None:
    """What a standard client sends (LangChain's ChatOpenAI: temperature 0.7) is served."""
    req = parse_chat(body(temperature=0.7, top_p=0.9, top_k=40, seed=7, stop="\n",
                          presence_penalty=0.5, frequency_penalty=-0.5, ignore_eos=True),
                     LIMITS, MODELS)
    assert req.sampling == Sampling(temperature=0.7, top_p=0.9, top_k=40, seed=7, stop=("\n",),
                                    presence_penalty=0.5, frequency_penalty=-0.5,
                                    ignore_eos=True)
    assert not req.sampling.greedy
    assert parse_chat(body(temperature=1), LIMITS, MODELS).sampling.temperature == 1.0
    # absent, and vLLM's "no cut" top_k -1: greedy, no cut
    plain = parse_chat(body(top_k=-1, stop=["a", "bc"]), LIMITS, MODELS).sampling
    assert plain.greedy and plain.top_k == 0 and plain.stop == ("a", "bc")


def test_unknown_parameter_names_the_accepted_ones() -> None:
    err = refused(body(tools=[]))
    assert "'tools'" in err.message and "max_completion_tokens" in err.message


@pytest.mark.parametrize("message, code, words", [
    ({"role": "tool", "content": "x", "tool_call_id": "1"}, "unsupported_role", "'tool'"),
    ({"content": "x"}, "invalid_request", "role: required"),
    ("hello", "invalid_request", "expected an object"),
    ({"role": "user", "content": "x", "tool_calls": []}, "unknown_parameter", "'tool_calls'"),
    ({"role": "user", "content": None}, "invalid_request", "required"),
    ({"role": "user", "content": []}, "empty_content", "empty list"),
    ({"role": "user", "content": "  "}, "empty_content", "no text and no image"),
    ({"role": "user", "content": [{"type": "text", "text": 3}]}, "invalid_request", "string"),
    ({"role": "user", "content": [{"type": "image_url", "image_url": PNG}]},
     "invalid_request", "string `url`"),
])
def test_bad_messages(message: Any, code: str, words: str) -> None:
    err = refused({"model": "vlm", "messages": [message]})
    assert (err.status, err.code) == (400, code) and words in err.message
    assert (err.param or "").startswith("messages[0]")


def test_message_and_text_limits() -> None:
    many = {"model": "vlm", "messages": [{"role": "user", "content": "hi"}] * 3}
    assert refused(many, ChatLimits(max_messages=2)).code == "too_many_messages"
    err = refused(body(TEXT, TEXT), ChatLimits(max_text_chars=20))
    assert err.code == "text_too_long" and "30 characters" in err.message


@pytest.mark.parametrize("headers, fields, words", [
    ({TTFT_HEADER: "fast"}, {}, "not a positive number"),
    ({TTFT_HEADER.lower(): "-1"}, {}, "not a positive number"),
    ({TTFT_HEADER: "inf"}, {}, "not a positive number"),
    ({TTFT_HEADER: "500"}, {"slo": {"ttft_ms": 400}}, "differ"),
])
def test_bad_slo_header(headers: dict[str, str], fields: dict[str, Any], words: str) -> None:
    err = refused(body(**fields), headers=headers)
    assert (err.status, err.code) == (400, "invalid_slo") and words in err.message


# ---- good requests ----

def test_text_only_with_system_prompt_and_history() -> None:
    raw = {"model": "vlm", "max_completion_tokens": 8, "stream": True,
           "stream_options": {"include_usage": True}, "temperature": 0, "top_p": 0.9,
           "seed": 7, "user": "u1", "n": 1, "stop": [], "slo": {"ttft_ms": 300},
           "messages": [{"role": "developer", "content": "answer in words"},
                        {"role": "user", "content": "what is one plus one?", "name": "ann"},
                        {"role": "assistant", "content": [{"type": "text", "text": "two"}]},
                        {"role": "user", "content": "what is two plus two?"}]}
    req = parse_chat(json.dumps(raw).encode(), LIMITS, MODELS, request_id="abc")
    assert [t.role for t in req.turns] == ["system", "user", "assistant", "user"]
    assert req.images == () and req.turns[3].text == "what is two plus two?"
    assert (req.request_id, req.max_tokens, req.stream, req.include_usage, req.ttft_slo_ms) == (
        "abc", 8, True, True, 300.0)


def test_slo_from_the_header() -> None:
    req = parse_chat(body(), LIMITS, MODELS, headers={TTFT_HEADER.upper(): "250"})
    assert req.ttft_slo_ms == 250.0
    assert parse_chat(body(slo={"ttft_ms": 250}), LIMITS, MODELS,
                      headers={TTFT_HEADER: "250.0"}).ttft_slo_ms == 250.0


def test_template_messages_as_strings_with_a_placeholder() -> None:
    req = parse_chat(body(image_part(PNG), TEXT, image_part(PNG)), LIMITS, MODELS)
    assert template_messages(req.turns, "<image>", "\n") == [
        {"role": "user", "content": "<image>\nread the digits\n<image>"}]
    assert template_messages(req.turns) == [{"role": "user", "content": [
        {"type": "image"}, {"type": "text", "text": "read the digits"}, {"type": "image"}]}]


def test_renders_and_counts_with_the_vlm_tokenizer() -> None:
    """The parts form through the VLM's own chat template (deployments/models/vlm) gives the
    prompt it was trained on; image tokens are counted as the engine expands them."""
    from deployments.models.vlm.tokenizer import build_tokenizer

    tokenizer = build_tokenizer()

    def render(msgs: list[dict[str, Any]]) -> str:
        return str(tokenizer.apply_chat_template(msgs, tokenize=False,
                                                 add_generation_prompt=True))

    def count(prompt: str, images: tuple[int, ...]) -> int:
        return len(tokenizer(prompt, add_special_tokens=False).input_ids) + sum(images) - len(
            images)

    def sixteen(width: int, height: int) -> int:  # the tiny VLM's tokens per image
        return 16

    raw = {"model": "vlm", "messages": [{"role": "system", "content": "be brief"},
                                        {"role": "user", "content": [image_part(PNG),
                                                                     image_part(PNG), TEXT]}]}
    req = parse_chat(raw, LIMITS, MODELS, context=ContextCheck(512, count, render, sixteen))
    assert req.prompt == render(template_messages(req.turns))
    assert req.prompt.startswith("<bos>system: be brief\nuser:")
    assert req.prompt.count("<image>") == 2 and req.prompt.endswith("assistant:")
    plain = len(tokenizer(req.prompt, add_special_tokens=False).input_ids)
    assert req.prompt_tokens == plain + 2 * 15 and req.image_tokens == (16, 16)
    assert req.max_tokens == 256
    sneaky = {"model": "vlm", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "read <image> the digits"}, image_part(PNG)]}]}
    err = refused(sneaky, context=ContextCheck(512, count, render, sixteen,
                                               reserved=tuple(tokenizer.all_special_tokens)))
    assert (err.code, err.param) == ("reserved_token", "messages[0].content")
    assert "'<image>'" in err.message

    def strict_count(prompt: str, images: tuple[int, ...]) -> int:  # as generation/prompt.py
        found = prompt.count("<image>")
        if found != len(images):
            raise ValueError(f"the prompt holds {found} image placeholders for {len(images)} "
                             "images")
        return count(prompt, images)
    err = refused(sneaky, context=ContextCheck(512, strict_count, render, sixteen))
    assert (err.status, err.code) == (400, "invalid_request") and "2 image placeholders" in err.message


