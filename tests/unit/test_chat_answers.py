"""The chat API's answers (deployments/ingress/chat/answers.py, chat/errors.py) as the official
`openai` client reads them: its types validate every object, and the client itself, over a
fake HTTP transport (the one boundary faked: no server runs here), parses our completions,
SSE streams, error bodies (exception class, message, code, param, retries) and model list."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from deployments.ingress.chat.answers import (
    DONE,
    SSE_HEADERS,
    SSE_MEDIA_TYPE,
    ChunkStream,
    ModelEntry,
    ServedBy,
    Usage,
    answer_headers,
    completion,
    models_page,
)
from deployments.ingress.chat.errors import ChatError, from_api_error
from deployments.ingress.chat.parse import ChatRequest, parse_chat
from deployments.ingress.chat.schemas import ChatLimits
from deployments.ingress.errors import ApiError

openai = pytest.importorskip("openai")
from openai.types.chat import ChatCompletion, ChatCompletionChunk  # noqa: E402

# the HTTP library the installed client runs on (httpx for openai 2.x, httpx2 for 3.x)
httpx2 = importlib.import_module(openai.DefaultHttpxClient.__mro__[1].__module__.split(".")[0])


def request(stream: bool = False, include_usage: bool = False) -> ChatRequest:
    raw: dict[str, Any] = {"model": "vlm", "messages": [{"role": "user", "content": "hi"}],
                           "stream": stream}
    if include_usage:
        raw["stream_options"] = {"include_usage": True}
    return parse_chat(raw, ChatLimits(), ["vlm"])


def events(raw: bytes) -> list[Any]:
    """The SSE events' data: JSON objects, and "[DONE]"."""
    assert raw.endswith(b"\n\n")
    out: list[Any] = []
    for event in raw.decode().split("\n\n")[:-1]:
        assert event.startswith("data: ") and "\n" not in event
        data = event.removeprefix("data: ")
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


def streamed(req: ChatRequest, texts: list[str]) -> bytes:
    s = ChunkStream(req, created_s=1_700_000_000)
    out = b"".join(s.delta(t) for t in texts)
    return out + s.finish("stop", Usage(prompt_tokens=40, completion_tokens=len(texts)),
                          ServedBy(ttft_ms=12.3456, deadline_met=True, path="disaggregated"))


def client(handler: Callable[[Any], Any], max_retries: int = 0) -> Any:
    transport = httpx2.MockTransport(handler)
    return openai.OpenAI(api_key="k", base_url="http://adaptserve.test/v1",
                         max_retries=max_retries, http_client=httpx2.Client(transport=transport))


def chat(c: Any, **kw: Any) -> Any:
    return c.chat.completions.create(model="vlm", messages=[{"role": "user", "content": "hi"}],
                                     **kw)


def test_completion_is_a_chat_completion() -> None:
    req = request()
    body = completion(req, " seven", "stop", Usage(40, 2), 1_700_000_000,
                      ServedBy(20.0, False, "monolith"))
    parsed = ChatCompletion.model_validate(body)
    assert parsed.id == req.request_id and parsed.object == "chat.completion"
    assert parsed.choices[0].message.content == " seven"
    assert parsed.choices[0].message.role == "assistant"
    assert parsed.choices[0].finish_reason == "stop"
    assert parsed.usage is not None and parsed.usage.total_tokens == 42
    assert parsed.model_extra == {"adaptserve": {"ttft_ms": 20.0, "deadline_met": False,
                                                 "path": "monolith"}}


def test_an_engine_abort_is_no_finish_reason() -> None:
    with pytest.raises(ValueError, match="abort"):
        completion(request(), "", "abort", Usage(1, 0), 0)  # type: ignore[arg-type]


@pytest.mark.parametrize("include_usage", [False, True])
def test_stream_chunk_sequence(include_usage: bool) -> None:
    req = request(stream=True, include_usage=include_usage)
    got = events(streamed(req, [" three", "", " one", " four"]))
    assert got[-1] == "[DONE]"
    chunks = [ChatCompletionChunk.model_validate(e) for e in got[:-1]]
    assert all(c.id == req.request_id and c.object == "chat.completion.chunk" for c in chunks)
    first, *middle = chunks[:3]
    assert (first.choices[0].delta.role, first.choices[0].delta.content) == ("assistant",
                                                                             " three")
    assert [c.choices[0].delta.content for c in middle] == [" one", " four"]  # "" sent nothing
    assert all(c.choices[0].delta.role is None for c in middle)
    finishing = chunks[3]
    assert finishing.choices[0].finish_reason == "stop" and finishing.choices[0].delta.content is None
    assert (finishing.model_extra or {})["adaptserve"]["ttft_ms"] == 12.346
    if include_usage:
        assert len(chunks) == 5 and chunks[4].choices == []
        assert chunks[4].usage is not None and chunks[4].usage.prompt_tokens == 40
        assert chunks[4].usage.total_tokens == 44  # 4 deltas, one empty
        assert all(e["usage"] is None for e in got[:4])
    else:
        assert len(chunks) == 4 and all("usage" not in e for e in got[:-1])


def test_stream_that_ends_before_any_text_still_names_the_role() -> None:
    req = request(stream=True)
    s = ChunkStream(req, 0)
    (only, done) = events(s.finish("length", Usage(3, 1)))
    chunk = ChatCompletionChunk.model_validate(only)
    assert chunk.choices[0].delta.role == "assistant" and chunk.choices[0].finish_reason == "length"
    assert done == "[DONE]"
    with pytest.raises(RuntimeError, match="already ended"):
        s.delta("more")


def test_openai_client_reads_a_completion_and_our_request_id() -> None:
    req = request()
    body = completion(req, " seven", "length", Usage(5, 1), 1)
    c = client(lambda r: httpx2.Response(200, json=body, headers=answer_headers(req)))
    out = chat(c)
    assert out.choices[0].message.content == " seven" and out.choices[0].finish_reason == "length"
    assert out._request_id == req.request_id


def test_openai_client_reads_a_stream_and_its_usage() -> None:
    req = request(stream=True, include_usage=True)
    raw = streamed(req, [" three", " one"])
    headers = {"content-type": SSE_MEDIA_TYPE, **SSE_HEADERS}
    c = client(lambda r: httpx2.Response(200, content=raw, headers=headers))
    chunks = list(chat(c, stream=True, stream_options={"include_usage": True}))
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == " three one"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 2


def test_openai_client_raises_a_mid_stream_error_with_our_message() -> None:
    req = request(stream=True)
    s = ChunkStream(req, 0)
    err = ChatError("deadline_exceeded", "TTFT SLO 300 ms lost while decoding")
    raw = s.delta(" three") + s.fail(err)
    assert events(raw)[-1] == "[DONE]"
    c = client(lambda r: httpx2.Response(200, content=raw,
                                         headers={"content-type": SSE_MEDIA_TYPE}))
    seen = []
    with pytest.raises(openai.APIError) as info:
        for chunk in chat(c, stream=True):
            seen.append(chunk.choices[0].delta.content)
    assert seen == [" three"]
    assert info.value.message == "TTFT SLO 300 ms lost while decoding"
    assert info.value.code == "deadline_exceeded"


@pytest.mark.parametrize("error, exception", [
    (ChatError("max_tokens_out_of_range", "max_tokens 0 is out of range: 1..256", "max_tokens"),
     "BadRequestError"),
    (ChatError("model_not_found", "model 'x' is not served; valid: ['vlm']", "model"),
     "NotFoundError"),
    (ChatError("unsupported_media_type", "GIF images are not accepted"), "APIStatusError"),
    (ChatError("invalid_api_key", "unknown key"), "AuthenticationError"),
    (ChatError("overloaded", "vlm is overloaded", retry_after_s=1), "RateLimitError"),
    (ChatError("unavailable", "no live replica", retry_after_s=1), "InternalServerError"),
    (ChatError("deadline_exceeded", "TTFT SLO lost"), "InternalServerError"),
])
def test_openai_client_exception_per_status(error: ChatError, exception: str) -> None:
    c = client(lambda r: httpx2.Response(error.status, json=error.body(),
                                         headers=error.headers()))
    with pytest.raises(openai.APIStatusError) as info:
        chat(c)
    exc = info.value
    assert type(exc).__name__ == exception and exc.status_code == error.status
    assert str(exc) == f"Error code: {error.status} - {error.message}"
    assert (exc.code, exc.param, exc.type) == (error.code, error.param, error.type)


def test_client_retries_overload_but_not_a_lost_deadline() -> None:
    for error, calls_expected in ((ChatError("overloaded", "busy", retry_after_s=0), 3),
                                  (ChatError("deadline_exceeded", "lost"), 1)):
        calls: list[int] = []

        def handler(r: Any, e: ChatError = error, seen: list[int] = calls) -> Any:
            seen.append(1)
            return httpx2.Response(e.status, json=e.body(), headers=e.headers())
        with pytest.raises(openai.APIStatusError):
            chat(client(handler, max_retries=2))
        assert len(calls) == calls_expected, error.code


@pytest.mark.parametrize("api, status, code", [
    (ApiError("overloaded", "vlm is overloaded", retry_after_s=2), 429, "overloaded"),
    (ApiError("unknown_model", "no such model", "model"), 404, "model_not_found"),
    (ApiError("invalid_input", "not an image", "inputs"), 400, "invalid_image"),
    (ApiError("malformed_json", "request body is not valid JSON"), 400, "malformed_json"),
    (ApiError("payload_too_large", "too big"), 413, "payload_too_large"),
    (ApiError("unavailable", "down", retry_after_s=1), 503, "unavailable"),
    (ApiError("internal_error", "boom"), 500, "internal_error"),
])
def test_shared_errors_in_openai_shape(api: ApiError, status: int, code: str) -> None:
    err = from_api_error(api)
    assert (err.status, err.code, err.message) == (status, code, api.message)
    assert set(err.body()["error"]) == {"message", "type", "param", "code"}
    assert err.headers().get("Retry-After") == (None if api.retry_after_s is None
                                                else str(api.retry_after_s))
    assert err.headers()["X-Adaptserve-Error"] == code
    answer = err.response()
    assert answer.status_code == status and json.loads(bytes(answer.body)) == err.body()


def test_models_page_beside_the_current_models_key() -> None:
    page = models_page([ModelEntry("vit", "classifier", 10),
                        ModelEntry("vlm", "chat", 20, (("context_len", 1024),
                                                       ("max_images", 8)))])
    body = {"models": [{"name": "vit"}], **page}  # the current answer keeps its key
    listed = list(client(lambda r: httpx2.Response(200, json=body)).models.list())
    assert [(m.id, m.object, m.created, m.owned_by) for m in listed] == [
        ("vit", "model", 10, "adaptserve"), ("vlm", "model", 20, "adaptserve")]
    assert (listed[1].model_extra or {})["adaptserve"] == {
        "kind": "chat", "route": "/v1/chat/completions", "context_len": 1024, "max_images": 8}


def test_done_is_the_sse_terminator() -> None:
    assert DONE == b"data: [DONE]\n\n"


@pytest.mark.parametrize(("seconds", "header"), [(1.0, "1"), (0.2, "1"), (2.5, "3"), (7, "7")])
def test_retry_after_is_whole_seconds_a_client_can_parse(seconds: float, header: str) -> None:
    # a stage failure sets 1.0 s: "Retry-After: 1.0" is no RFC 9110 delay-seconds, and
    # urllib3's Retry raises InvalidHeader on it; both error paths answer whole seconds
    from urllib3.util.retry import Retry

    from deployments.ingress.errors import error_response

    chat = ChatError("replica_unavailable", "a stage failed", retry_after_s=seconds)
    api = error_response(503, "unavailable", "no replica", retry_after_s=seconds)
    assert chat.headers()["Retry-After"] == header == api.headers["retry-after"]
    assert Retry().parse_retry_after(header) == float(header)
