"""A chat completions body as a `ChatRequest`, or the `ChatError` of the first problem, checked
cheapest first: JSON (proxy/strict_json.py), fields, model, parameters, messages and their counts,
the TTFT SLO's form, then the images (data URL, base64, signature, header size), then the
prompt's length (the engine's tokenizer, through `ContextCheck`) and the SLO against the fastest
possible time to first token. Pure: no Ray, no engine; the hooks are the lead's to pass.

`template_messages` turns the parsed turns into what a Hugging Face tokenizer's
`apply_chat_template` takes, an image placeholder where each image was, in order.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from deployments.engines.sampling import Sampling
from deployments.ingress.chat.errors import ChatError, from_validation
from deployments.ingress.chat.images import ImageInput, read_image
from deployments.ingress.chat.messages import ImageSlot, Turn, parse_messages
from deployments.ingress.chat.schemas import (
    ACCEPTED_FIELDS,
    TTFT_HEADER,
    ChatCompletionRequest,
    ChatLimits,
)
from deployments.ingress.proxy.strict_json import JsonLimits, JsonProblem, loads_strict

FastestTtft = Callable[[int, int | None], float]
"""(number of images, prompt tokens or None) -> the least TTFT possible, ms."""


@dataclass(frozen=True)
class ContextCheck:
    """The engine's view of a prompt: `render` is the tokenizer's chat template (e.g. `lambda
    m: tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True)`), given
    `template_messages(turns, image_placeholder)`; `image_tokens(width, height)` is one
    image's tokens (its architecture's adapter: fixed, or following the image's size);
    `count_prompt_tokens(prompt, image_tokens)` counts the rendered prompt's tokens with each
    image's tokens expanded (Engine.prompt_tokens).
    `reserved`: strings no text may hold, the tokenizer's special tokens (`<image>` written in
    a message would otherwise become an image slot with no image). A ValueError of either hook
    is the messages' fault (a 400 with its message)."""

    context_len: int
    count_prompt_tokens: Callable[[str, tuple[int, ...]], int]
    render: Callable[[list[dict[str, Any]]], str]
    image_tokens: Callable[[int, int], int]
    image_placeholder: str | None = None
    reserved: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChatRequest:
    request_id: str  # also the answer's `id`
    model: str
    turns: tuple[Turn, ...]
    images: tuple[ImageInput, ...] = field(repr=False)
    max_tokens: int
    stream: bool
    include_usage: bool
    ttft_slo_ms: float
    sampling: Sampling = Sampling()  # greedy unless the request asks otherwise
    prompt: str | None = field(default=None, repr=False)  # rendered, when a ContextCheck ran
    prompt_tokens: int | None = None  # image tokens included, when a ContextCheck ran
    image_tokens: tuple[int, ...] = ()  # per image, when a ContextCheck ran

    @property
    def num_images(self) -> int:
        return len(self.images)


def parse_chat(body: bytes | Mapping[str, Any], limits: ChatLimits, known_models: Sequence[str],
               *, headers: Mapping[str, str] | None = None,
               min_ttft_ms: float | FastestTtft = 0.0, context: ContextCheck | None = None,
               request_id: str | None = None,
               json_limits: JsonLimits | None = None) -> ChatRequest:
    """The request `body` (raw bytes: strict JSON; or already parsed) checked against `limits`
    and the chat models served (`known_models`). `headers` (any case) may carry the TTFT SLO;
    `min_ttft_ms`: the least TTFT possible, a constant or a function of the request's images
    and prompt tokens; `context`: the prompt-length check (skipped when None)."""
    wire = _validated(body, json_limits or JsonLimits())
    if wire.model not in known_models:
        raise ChatError("model_not_found", f"model {wire.model!r} is not served by "
                        f"/v1/chat/completions; valid: {list(known_models)}", "model")
    _check_parameters(wire)
    sampling = _sampling(wire)
    turns, refs = parse_messages(wire.messages, limits)
    slo_ms = _ttft_slo_ms(wire, headers or {}, limits)
    images = tuple(read_image(r.url, r.index, r.param, limits) for r in refs)
    prompt, prompt_tokens, room, image_tokens = None, None, None, ()
    if context is not None:
        image_tokens = _image_tokens(images, context)
        prompt, prompt_tokens = _count(turns, image_tokens, context)
        room = context.context_len - prompt_tokens
    max_tokens = _max_tokens(wire, limits, room, prompt_tokens)
    fastest = (min_ttft_ms(len(images), prompt_tokens) if callable(min_ttft_ms)
               else min_ttft_ms)
    if slo_ms < fastest:
        raise ChatError("slo_unachievable", f"TTFT SLO {slo_ms:g} ms is below the fastest "
                        f"possible time to first token of this request ({len(images)} images, "
                        f"{_tokens(prompt_tokens)}): {fastest:.1f} ms; ask for at least "
                        f"{math.ceil(fastest)} ms", "slo.ttft_ms")
    options = wire.stream_options
    return ChatRequest(
        request_id=request_id or f"chatcmpl-{uuid.uuid4().hex}", model=wire.model,
        turns=turns, images=images, max_tokens=max_tokens, stream=bool(wire.stream),
        include_usage=bool(options and options.include_usage), ttft_slo_ms=slo_ms,
        sampling=sampling, prompt=prompt, prompt_tokens=prompt_tokens,
        image_tokens=image_tokens)


def _validated(body: bytes | Mapping[str, Any], json_limits: JsonLimits) -> ChatCompletionRequest:
    if isinstance(body, bytes | bytearray | str):
        try:
            body = loads_strict(body, json_limits)
        except JsonProblem as exc:
            raise ChatError(exc.type, exc.message) from None
    if not isinstance(body, Mapping):
        raise ChatError("invalid_request", f"the body must be a JSON object, got "
                        f"{type(body).__name__}")
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise from_validation(exc, ACCEPTED_FIELDS) from None


def _check_parameters(wire: ChatCompletionRequest) -> None:
    """What the schema takes but this server cannot honour."""
    if wire.n not in (None, 1):
        raise ChatError("unsupported_value", f"n {wire.n}: one choice per request only; send "
                        "n 1 or leave it out, and send several requests for several answers",
                        "n")
    if wire.stream_options is not None and not wire.stream:
        raise ChatError("invalid_request", "stream_options is only allowed when stream is "
                        "true", "stream_options")
    both = (wire.max_tokens, wire.max_completion_tokens)
    if None not in both and both[0] != both[1]:
        raise ChatError("invalid_request", f"max_tokens ({both[0]}) and max_completion_tokens "
                        f"({both[1]}) differ; send one", "max_completion_tokens")


def _ttft_slo_ms(wire: ChatCompletionRequest, headers: Mapping[str, str],
                 limits: ChatLimits) -> float:
    """The body's `slo.ttft_ms`, else the header's, else the default; both given must agree."""
    raw = next((v for k, v in headers.items() if k.lower() == TTFT_HEADER.lower()), None)
    from_header = None
    if raw is not None:
        try:
            from_header = float(raw)
        except ValueError:
            from_header = math.nan
        if not math.isfinite(from_header) or from_header <= 0:
            raise ChatError("invalid_slo", f"header {TTFT_HEADER}: {raw!r} is not a positive "
                            "number of milliseconds", TTFT_HEADER)
    from_body = wire.slo.ttft_ms if wire.slo is not None else None
    if None not in (from_header, from_body) and from_header != from_body:
        raise ChatError("invalid_slo", f"slo.ttft_ms ({from_body:g}) and header {TTFT_HEADER} "
                        f"({from_header:g}) differ; send one", "slo.ttft_ms")
    found = from_body if from_body is not None else from_header
    return found if found is not None else limits.default_ttft_slo_ms


def _image_tokens(images: tuple[ImageInput, ...], context: ContextCheck) -> tuple[int, ...]:
    try:
        return tuple(context.image_tokens(i.width, i.height) for i in images)
    except ValueError as exc:  # a size the model's image processor refuses
        raise ChatError("invalid_image", f"messages: {exc}", "messages") from None


def _count(turns: tuple[Turn, ...], image_tokens: tuple[int, ...], context: ContextCheck
           ) -> tuple[str, int]:
    for i, turn in enumerate(turns):
        found = next((r for r in context.reserved if r and r in turn.text), None)
        if found is not None:
            raise ChatError("reserved_token", f"messages[{i}]: the text holds {found!r}, a "
                            "special token of the model's tokenizer; images go in image_url "
                            "parts", f"messages[{i}].content")
    try:
        prompt = context.render(template_messages(turns, context.image_placeholder))
        tokens = context.count_prompt_tokens(prompt, image_tokens)
    except ValueError as exc:  # the template or tokenizer refused these messages
        raise ChatError("invalid_request", f"messages: {exc}", "messages") from None
    if tokens >= context.context_len:
        raise ChatError("context_length_exceeded", f"the prompt is {tokens} tokens (images "
                        f"included); the model's context is {context.context_len} tokens, "
                        "which must also hold at least one generated token", "messages")
    return prompt, tokens


def _sampling(wire: ChatCompletionRequest) -> Sampling:
    """The request's `Sampling` (the schema has checked each field's range): absent fields
    keep greedy decoding, `stop` as a tuple (a string is one sequence), `top_k` -1 (vLLM's
    "no cut") as 0."""
    stop = (wire.stop,) if isinstance(wire.stop, str) else tuple(wire.stop or ())
    if any(not s for s in stop):
        raise ChatError("invalid_request", "stop: an empty stop sequence would end every answer "
                        "at once; leave it out", "stop")
    try:
        return Sampling(temperature=wire.temperature or 0.0,
                        top_p=1.0 if wire.top_p is None else wire.top_p,
                        top_k=max(0, wire.top_k or 0), seed=wire.seed, stop=stop,
                        presence_penalty=wire.presence_penalty or 0.0,
                        frequency_penalty=wire.frequency_penalty or 0.0,
                        ignore_eos=wire.ignore_eos)
    except ValueError as exc:  # what the schema cannot say alone (e.g. a stop too long)
        raise ChatError("invalid_request", str(exc), "stop") from None


def _max_tokens(wire: ChatCompletionRequest, limits: ChatLimits, room: int | None,
                prompt_tokens: int | None) -> int:
    """The request's max_tokens (1..limits.max_tokens, and within the context's room), or the
    default: limits.default_max_tokens, else limits.max_tokens, capped by the room."""
    asked = (wire.max_completion_tokens if wire.max_completion_tokens is not None
             else wire.max_tokens)
    name = "max_completion_tokens" if wire.max_completion_tokens is not None else "max_tokens"
    if asked is None:
        default = limits.default_max_tokens or limits.max_tokens
        return default if room is None else min(default, room)
    if not 1 <= asked <= limits.max_tokens:
        raise ChatError("max_tokens_out_of_range", f"{name} {asked} is out of range: "
                        f"1..{limits.max_tokens}", name)
    if room is not None and prompt_tokens is not None and asked > room:
        raise ChatError("context_length_exceeded", f"the prompt ({prompt_tokens} tokens, images "
                        f"included) and {name} ({asked}) need {prompt_tokens + asked} tokens; "
                        f"the model's context is {prompt_tokens + room}: ask for at most "
                        f"{room} tokens or shorten the messages", name)
    return asked


def _tokens(prompt_tokens: int | None) -> str:
    return "prompt not counted" if prompt_tokens is None else f"{prompt_tokens} prompt tokens"


def template_messages(turns: Sequence[Turn], image_placeholder: str | None = None,
                      separator: str = "") -> list[dict[str, Any]]:
    """The `messages` a tokenizer's chat template takes. `image_placeholder` None: content as
    parts, `{"type": "text", "text": ...}` and `{"type": "image"}` where each image was (the
    multimodal templates' convention; ours renders an image part as `<image>`); a string: the
    content as one string, text and a placeholder per image joined in order by `separator`
    (templates that take string content)."""
    out: list[dict[str, Any]] = []
    for turn in turns:
        if image_placeholder is None:
            content: Any = [{"type": "image"} if isinstance(p, ImageSlot)
                            else {"type": "text", "text": p.text} for p in turn.parts]
        else:
            content = separator.join(image_placeholder if isinstance(p, ImageSlot) else p.text
                                     for p in turn.parts)
        out.append({"role": turn.role, "content": content})
    return out
