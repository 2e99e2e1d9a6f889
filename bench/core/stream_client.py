"""An open-loop, streaming OpenAI-protocol client (aiohttp, server-sent events), measured at the
client: TTFT from the send to the first chunk with content (an empty answer: to its finishing
chunk), TBT the gaps between content
chunks, end-to-end latency to `[DONE]` (or the stream's end), the HTTP status and error, the
answer text and whether it is the expected one.

Each request is sent at its scheduled time whatever happened to earlier ones (one task each);
every request gets exactly one `GenRecord` (a timeout, a refused connection, a stream that
broke or carried an error event are recorded as such), so sent = ok + errors always.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

from bench.core.open_loop import open_loop as core_open_loop


@dataclass(frozen=True)
class Prepared:
    """A request ready to send: its body bytes, when, and what the answer must be."""

    index: int
    arrival_s: float
    body: bytes = field(repr=False)
    answer: str
    task: str
    num_images: int
    history_turns: int
    in_burst: bool


@dataclass(frozen=True)
class GenRecord:
    index: int
    task: str
    num_images: int
    history_turns: int
    in_burst: bool
    scheduled_s: float  # from the run's start
    send_lag_ms: float  # how late the client sent it (client overload shows here)
    status: str  # "ok", "http_<code>", "timeout", "transport", "stream_error", "no_done"
    http_status: int | None
    error: str
    ttft_ms: float | None
    tbt_ms: tuple[float, ...]
    e2e_ms: float | None
    text: str
    expected: str
    prompt_tokens: int | None
    completion_tokens: int | None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def correct(self) -> bool:
        return self.ok and self.text.strip() == self.expected

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tbt_ms"] = [round(x, 3) for x in self.tbt_ms]
        return d


@dataclass
class StreamState:
    """What an SSE stream said so far (`feed` one line at a time)."""

    content_times: list[float] = field(default_factory=list)
    finish_time: float | None = None  # the chunk with a finish_reason
    text: list[str] = field(default_factory=list)
    done: bool = False
    error: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    def feed(self, line: bytes | str, now: float) -> None:
        """One line of the stream: `data: {json}` (a chunk, a usage chunk or an error event),
        `data: [DONE]`, or anything else (comments, blank separators: ignored)."""
        s = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        s = s.strip()
        if not s.startswith("data:"):
            return
        payload = s[5:].strip()
        if payload == "[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(payload)
        except ValueError:
            self.error = self.error or f"bad SSE data: {payload[:80]}"
            return
        self._event(obj, now)

    def _event(self, obj: Any, now: float) -> None:
        if not isinstance(obj, dict):
            return
        if "error" in obj:
            err = obj["error"]
            self.error = self.error or (json.dumps(err)[:200] if not isinstance(err, str) else err)
            return
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)
        for choice in obj.get("choices") or ():
            content = (choice.get("delta") or {}).get("content")
            if content:
                self.text.append(content)
                self.content_times.append(now)
            if choice.get("finish_reason") and self.finish_time is None:
                self.finish_time = now

    def first_token_time(self) -> float | None:
        """The first chunk with content; for an empty answer, the finishing chunk."""
        return self.content_times[0] if self.content_times else self.finish_time


def _record(p: Prepared, lag_ms: float, status: str, http_status: int | None, error: str,
            sent: float, end: float | None, st: StreamState | None) -> GenRecord:
    times = st.content_times if st is not None else []
    first = st.first_token_time() if st is not None else None
    ttft = (first - sent) * 1000.0 if first is not None else None
    tbt = tuple((b - a) * 1000.0 for a, b in zip(times, times[1:], strict=False))
    return GenRecord(p.index, p.task, p.num_images, p.history_turns, p.in_burst, p.arrival_s,
                     lag_ms, status, http_status, error[:300], ttft, tbt,
                     None if end is None else (end - sent) * 1000.0,
                     "".join(st.text) if st is not None else "", p.answer,
                     st.prompt_tokens if st is not None else None,
                     st.completion_tokens if st is not None else None)


async def send_one(session: aiohttp.ClientSession, url: str, p: Prepared,
                   headers: Mapping[str, str], timeout_s: float, lag_ms: float) -> GenRecord:
    """POST one streaming request; never raises (every outcome is a record)."""
    st = StreamState()
    sent = time.perf_counter()
    hdrs = {**headers, "X-Request-Start": f"t={time.time():.6f}"}
    try:
        async with session.post(url, data=p.body, headers=hdrs,
                                timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status != 200:
                text = await resp.text()
                return _record(p, lag_ms, f"http_{resp.status}", resp.status, text, sent,
                               time.perf_counter(), None)
            async for line in resp.content:
                st.feed(line, time.perf_counter())
            end = time.perf_counter()
    except TimeoutError:
        return _record(p, lag_ms, "timeout", None, f"no answer within {timeout_s:g} s", sent,
                       None, st)
    except aiohttp.ClientError as exc:
        return _record(p, lag_ms, "transport", None, f"{type(exc).__name__}: {exc}", sent,
                       None, st)
    except Exception as exc:  # a record, whatever happened
        return _record(p, lag_ms, "client_error", None, f"{type(exc).__name__}: {exc}", sent,
                       None, st)
    status = "stream_error" if st.error else ("ok" if st.done else "no_done")
    return _record(p, lag_ms, status, 200, st.error, sent, end, st)


async def open_loop(url: str, prepared: Sequence[Prepared], headers: Mapping[str, str],
                    timeout_s: float, start_delay_s: float = 0.5) -> list[GenRecord]:
    """Every request at its scheduled time (from a common start); one record each, in the
    order given."""
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
    order = sorted(range(len(prepared)), key=lambda i: prepared[i].arrival_s)
    async with aiohttp.ClientSession(connector=connector) as session:
        def send(k: int, _t: float, lag_ms: float) -> Awaitable[GenRecord]:
            return send_one(session, url, prepared[order[k]], headers, timeout_s, lag_ms)

        sent = await core_open_loop([prepared[i].arrival_s for i in order], send,
                                    start_delay_s=start_delay_s)
    records: list[GenRecord] = [sent[0]] * len(prepared) if sent else []
    for k, i in enumerate(order):
        records[i] = sent[k]
    return records


def run_open_loop(url: str, prepared: Sequence[Prepared], headers: Mapping[str, str],
                  timeout_s: float) -> list[GenRecord]:
    return asyncio.run(open_loop(url, prepared, headers, timeout_s))


async def _sequential(url: str, prepared: Sequence[Prepared], headers: Mapping[str, str],
                      timeout_s: float) -> list[GenRecord]:
    async with aiohttp.ClientSession() as session:
        return [await send_one(session, url, p, headers, timeout_s, 0.0) for p in prepared]


def run_sequential(url: str, prepared: Sequence[Prepared], headers: Mapping[str, str],
                   timeout_s: float) -> list[GenRecord]:
    """One at a time (warm-up, light-load checks)."""
    return asyncio.run(_sequential(url, prepared, headers, timeout_s))
