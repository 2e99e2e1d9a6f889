"""The `messages` of a chat request, checked by hand so each problem gets its own code and a
message naming the place (`messages[1].content[2].type`): OpenAI clients show `error.message`.

Roles: system (and `developer`, OpenAI's newer name for it), user, assistant; `tool` and
`function` are refused (no tool calls). Content: a string, or a non-empty list of parts:
`{"type": "text", "text": ...}` anywhere, `{"type": "image_url", "image_url": {"url": ...,
"detail": ...}}` in user messages only (`detail` is accepted, without effect). A message's
`name` is accepted and not rendered. Images are only located here (their data URLs are read by
images.py, after the request's image count is known to be within the limit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from deployments.ingress.chat.errors import ChatError
from deployments.ingress.chat.schemas import ChatLimits

Role = Literal["system", "user", "assistant"]
ROLES: dict[str, Role] = {"system": "system", "developer": "system", "user": "user",
                          "assistant": "assistant"}
PART_TYPES: dict[Role, tuple[str, ...]] = {"system": ("text",), "user": ("text", "image_url"),
                                           "assistant": ("text",)}
MESSAGE_KEYS = ("role", "content", "name")
DETAILS = (None, "auto", "low", "high")


@dataclass(frozen=True)
class TextSlot:
    text: str


@dataclass(frozen=True)
class ImageSlot:
    index: int  # the image's place in the request (ChatRequest.images[index])


Slot = TextSlot | ImageSlot


@dataclass(frozen=True)
class Turn:
    """One message: its role and its parts in order."""

    role: Role
    parts: tuple[Slot, ...]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextSlot))

    @property
    def num_images(self) -> int:
        return sum(isinstance(p, ImageSlot) for p in self.parts)


@dataclass(frozen=True)
class ImageRef:
    """An image part not read yet: its URL and where it is (`param`)."""

    index: int
    param: str
    url: str = field(repr=False)


def parse_messages(raw: list[Any], limits: ChatLimits) -> tuple[tuple[Turn, ...],
                                                               tuple[ImageRef, ...]]:
    """The turns and the image parts in order, or the ChatError of the first problem."""
    if not raw:
        raise ChatError("empty_messages", "messages: must hold at least one message",
                        "messages")
    if len(raw) > limits.max_messages:
        raise ChatError("too_many_messages", f"messages: {len(raw)} messages; at most "
                        f"{limits.max_messages} are accepted", "messages")
    turns: list[Turn] = []
    refs: list[ImageRef] = []
    for i, message in enumerate(raw):
        turn = _turn(f"messages[{i}]", message, refs)
        turns.append(turn)
    chars = sum(len(t.text) for t in turns)
    if chars > limits.max_text_chars:
        raise ChatError("text_too_long", f"messages: {chars} characters of text; at most "
                        f"{limits.max_text_chars} are accepted", "messages")
    if refs and limits.max_images == 0:
        raise ChatError("too_many_images", "messages: this model takes no images (a text-only "
                        "model); send text parts only", "messages")
    if len(refs) > limits.max_images:
        raise ChatError("too_many_images", f"messages: {len(refs)} images; at most "
                        f"{limits.max_images} per request are accepted", "messages")
    return tuple(turns), tuple(refs)


def _turn(where: str, message: Any, refs: list[ImageRef]) -> Turn:
    """One message as a Turn; its image parts are appended to `refs` (numbered on)."""
    if not isinstance(message, dict):
        raise ChatError("invalid_request", f"{where}: expected an object with role and "
                        f"content, got {_kind(message)}", where)
    if "role" not in message:
        raise ChatError("invalid_request", f"{where}.role: required", f"{where}.role")
    role = ROLES.get(message["role"]) if isinstance(message["role"], str) else None
    if role is None:
        raise ChatError("unsupported_role", f"{where}.role: {message['role']!r} is not "
                        f"supported; roles: {', '.join(ROLES)} (no tool calls)", f"{where}.role")
    _known_keys(where, message, MESSAGE_KEYS)
    if not isinstance(message.get("name", ""), str):
        raise ChatError("invalid_request", f"{where}.name: must be a string", f"{where}.name")
    content = message.get("content")
    if isinstance(content, str):
        parts: tuple[Slot, ...] = (TextSlot(content),)
    elif isinstance(content, list) and content:
        parts = tuple(_part(f"{where}.content[{j}]", p, role, refs)
                      for j, p in enumerate(content))
    else:
        problem = "required" if content is None else (
            "an empty list" if content == [] else f"got {_kind(content)}")
        raise ChatError("invalid_request" if content != [] else "empty_content",
                        f"{where}.content: must be a string or a non-empty list of parts; "
                        f"{problem}", f"{where}.content")
    turn = Turn(role, parts)
    if not turn.num_images and not turn.text.strip():
        raise ChatError("empty_content", f"{where}.content: no text and no image",
                        f"{where}.content")
    return turn


def _part(where: str, part: Any, role: Role, refs: list[ImageRef]) -> Slot:
    if not isinstance(part, dict):
        raise ChatError("invalid_request", f"{where}: expected a content part object, got "
                        f"{_kind(part)}", where)
    kind, allowed = part.get("type"), PART_TYPES[role]
    if kind not in allowed:
        takes = " and ".join(f"{t!r}" for t in allowed)
        hint = "; images go in user messages" if kind == "image_url" else ""
        raise ChatError("unsupported_content_part", f"{where}.type: content part type "
                        f"{kind!r} is not supported in a {role} message, which takes {takes} "
                        f"parts{hint}", f"{where}.type")
    if kind == "text":
        _known_keys(where, part, ("type", "text"))
        if not isinstance(part.get("text"), str):
            raise ChatError("invalid_request", f"{where}.text: must be a string",
                            f"{where}.text")
        return TextSlot(part["text"])
    _known_keys(where, part, ("type", "image_url"))
    image = part.get("image_url")
    inner = f"{where}.image_url"
    if not isinstance(image, dict) or not isinstance(image.get("url"), str):
        raise ChatError("invalid_request", f"{inner}: must be an object with a string `url` "
                        f"(a data URL)", inner)
    _known_keys(inner, image, ("url", "detail"))
    if image.get("detail") not in DETAILS:
        raise ChatError("invalid_request", f"{inner}.detail: {image['detail']!r}; one of "
                        f"auto, low, high", f"{inner}.detail")
    refs.append(ImageRef(len(refs), f"{inner}.url", image["url"]))
    return ImageSlot(len(refs) - 1)


def _known_keys(where: str, obj: dict[str, Any], keys: tuple[str, ...]) -> None:
    unknown = [k for k in obj if k not in keys]
    if unknown:
        raise ChatError("unknown_parameter", f"{where}: unrecognized field {unknown[0]!r}; "
                        f"it takes {', '.join(keys)}", f"{where}.{unknown[0]}")


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__
