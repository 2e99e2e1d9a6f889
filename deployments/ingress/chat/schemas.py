"""Wire format of `POST /v1/chat/completions` (OpenAI's chat completions API, the subset a
vision-language model served greedily can honour) and the limits a request is held to.

Fields taken (anything else is a 400 `unknown_parameter` naming it):
- `model`, `messages` (roles system/developer, user, assistant; content a string or a list of
  `text` and, in user messages, `image_url` parts with data URLs);
- `max_completion_tokens` or its older name `max_tokens` (1..`ChatLimits.max_tokens`);
- `stream`, `stream_options.include_usage`;
- sampling, passed to the engine as `deployments/engines/sampling.py` says: `temperature`
  (0..2; absent or 0: greedy, the same request always gives the same answer), `top_p`
  (0 < top_p <= 1), `top_k` (vLLM's extension; 0 or -1: no cut), `seed` (the same seed, the
  same tokens), `stop` (a string or up to 4), `presence_penalty` and `frequency_penalty`
  (-2..2), `ignore_eos` (vLLM's extension, sent by `vllm bench serve --ignore-eos`: generate
  `max_tokens` tokens whatever the model says); `user`: the client's label, no effect;
- `n`: 1 only (a 400 naming it otherwise: one choice per request);
- `slo.ttft_ms` (ours): the time-to-first-token SLO in ms from arrival; the header
  `X-Adaptserve-TTFT-SLO-Ms` says the same for clients that cannot add body fields; absent:
  `ChatLimits.default_ttft_slo_ms`.

Messages are checked by messages.py (exact messages per problem), so `messages` is typed
loosely here and described for the OpenAPI document by MESSAGES_SCHEMA.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from deployments.config import StrictConfig

TTFT_HEADER = "X-Adaptserve-TTFT-SLO-Ms"
MIB = 1024 * 1024


class ChatLimits(StrictConfig):
    """What one chat request may hold (all checked before any model work)."""

    max_images: int = Field(default=8, ge=0, description="image parts per request")
    max_image_bytes: int = Field(default=4 * MIB, gt=0,
                                 description="decoded bytes of one image")
    max_image_pixels: int = Field(default=1024 * 1024, gt=0,
                                  description="width x height of one image (read from its "
                                              "header, before any decode)")
    max_messages: int = Field(default=64, gt=0, description="messages per request")
    max_text_chars: int = Field(default=32_000, gt=0,
                                description="characters of all text parts together")
    max_tokens: int = Field(default=256, gt=0,
                            description="largest max_tokens / max_completion_tokens accepted")
    default_max_tokens: int | None = Field(
        default=None, gt=0, description="when the request gives none; null: max_tokens, "
                                        "capped by the context room left after the prompt")
    ttft_grace_s: float = Field(default=1.0, ge=0,
                                description="no first token this long after the TTFT deadline "
                                            "(a stage without a live replica, a stuck call): 504")
    default_ttft_slo_ms: float = Field(default=2000.0, gt=0,
                                       description="TTFT SLO of a request that names none")
    decode_images: bool = Field(
        default=False, description="also decode each image fully while parsing (a truncated "
                                   "or corrupt image is a 400 before any stage runs, at the "
                                   "cost of decoding at the ingress); false: the header only")


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_usage: bool = Field(default=False, strict=True,
                                description="a last chunk with `usage` and no choices")


class ChatSLO(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    ttft_ms: float = Field(gt=0, strict=True,
                           description="time-to-first-token bound in ms from arrival")


_TEXT_PART = {"type": "object", "additionalProperties": False, "required": ["type", "text"],
              "properties": {"type": {"const": "text"}, "text": {"type": "string"}}}
_IMAGE_PART = {
    "type": "object", "additionalProperties": False, "required": ["type", "image_url"],
    "properties": {"type": {"const": "image_url"}, "image_url": {
        "type": "object", "additionalProperties": False, "required": ["url"],
        "properties": {"url": {"type": "string", "pattern": "^data:image/",
                               "description": "data:image/png;base64,... (PNG, JPEG or "
                                              "WebP); the server fetches no URL"},
                       "detail": {"enum": ["auto", "low", "high"],
                                  "description": "accepted, without effect"}}}}}


def _message(roles: list[str], parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["role", "content"],
            "properties": {"role": {"enum": roles}, "name": {"type": "string"},
                           "content": {"anyOf": [{"type": "string"},
                                                 {"type": "array", "minItems": 1,
                                                  "items": {"anyOf": parts}}]}}}


MESSAGES_SCHEMA: dict[str, Any] = {
    "type": "array", "minItems": 1, "title": "Messages",
    "items": {"anyOf": [_message(["system", "developer"], [_TEXT_PART]),
                        _message(["user"], [_TEXT_PART, _IMAGE_PART]),
                        _message(["assistant"], [_TEXT_PART])]}}


class ChatCompletionRequest(BaseModel):
    """The body of POST /v1/chat/completions (see the module's docstring for each field)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = Field(strict=True, description="a chat model, see GET /v1/models")
    messages: Annotated[list[Any], WithJsonSchema(MESSAGES_SCHEMA)]
    max_completion_tokens: int | None = Field(default=None, strict=True)
    max_tokens: int | None = Field(default=None, strict=True,
                                   description="older name of max_completion_tokens")
    stream: bool | None = Field(default=False, strict=True)
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2, strict=True,
                                      description="0 or absent: greedy decoding")
    top_p: float | None = Field(default=None, gt=0, le=1, strict=True,
                                description="nucleus sampling")
    top_k: int | None = Field(default=None, ge=-1, strict=True,
                              description="vLLM's extension: the k most likely tokens only "
                                          "(0 or -1: no cut)")
    presence_penalty: float | None = Field(default=None, ge=-2, le=2, strict=True)
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2, strict=True)
    n: int | None = Field(default=None, strict=True, description="1 only")
    stop: str | list[str] | None = Field(default=None, max_length=4,
                                         description="up to 4 sequences the answer ends before")
    seed: int | None = Field(default=None, strict=True,
                             description="the same seed gives the same tokens")
    user: str | None = Field(default=None, strict=True, description="accepted, no effect")
    ignore_eos: bool = Field(default=False, strict=True,
                             description="vLLM's extension: generate max_tokens tokens")
    slo: ChatSLO | None = Field(default=None, description="ours: the TTFT SLO")


ACCEPTED_FIELDS = tuple(ChatCompletionRequest.model_fields)
