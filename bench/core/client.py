"""Open-loop HTTP load generator for the classification API.

Arrival times come from `app.sim.traces.spec` (the same arrivals the scheduler simulator uses);
each request is sent at its scheduled time whatever happened to earlier ones (one asyncio task
per request, one aiohttp session with a pool larger than the expected concurrency). Payloads are
prebuilt JSON bytes from the model's held-out examples, cycled in order. Every request gets
exactly one `RequestRecord` (per item for jobs): timeouts and transport errors are recorded as
such, never dropped; a 429 or 503 is a refusal (admission said no), kept with its Retry-After
and the client latency of the refusal, which is the point of refusing.

Each request carries `X-Request-Start: t=<unix seconds at send>` (the load balancers'
convention) unless `request_start_header` is off, so that a server which honours it starts its
clock where the client's starts; the server's own verdict (`decision.deadline_met`,
`latency_ms`) is kept beside the client's to compare the two.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from app.sim.replica.request_metrics import LoadSummary, RequestRecord, summarize, timeseries
from app.sim.replica.utilities import call_utility, check_utilities
from app.sim.traces.spec import TraceSpec, arrival_times
from bench.core.answers import REFUSAL_STATUSES
from bench.core.open_loop import open_loop


@dataclass(frozen=True)
class LoadgenConfig:
    url: str  # server root, e.g. http://127.0.0.1:8000
    model: str
    trace: TraceSpec
    slo_ms: float
    task: str | None = None
    min_accuracy: float | None = None
    job_size: int = 1  # 1: POST /v1/classify; N > 1: POST /v1/jobs with N items
    timeout_s: float | None = None  # default max(10 s, 20 x SLO)
    max_connections: int = 4096
    start_delay_s: float = 0.2  # between building the schedule and the first send
    data_dir: Path | None = None  # the shared data directory; the twitter trace is read there
    request_start_header: bool = True  # send X-Request-Start with the send time
    utilities: tuple[float, ...] = ()  # slo.utility per call, cyclic (app/sim/replica/utilities.py)

    def __post_init__(self) -> None:
        if self.job_size < 1:
            raise ValueError(f"job size must be >= 1, got {self.job_size}")
        if self.slo_ms <= 0:
            raise ValueError(f"SLO must be positive, got {self.slo_ms}")
        check_utilities(self.utilities)

    @property
    def request_timeout_s(self) -> float:
        return self.timeout_s if self.timeout_s is not None else max(10.0, 0.02 * self.slo_ms)

    def endpoint(self) -> str:
        path = "/v1/classify" if self.job_size == 1 else "/v1/jobs"
        return self.url.rstrip("/") + path

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["trace"] = self.trace.to_dict()
        d["data_dir"] = None if self.data_dir is None else str(self.data_dir)
        return d


def trace_data_dir(trace: TraceSpec, override: str | Path | None = None) -> Path | None:
    """The shared data directory where `trace` reads its shape (override, else the default), or
    None for traces that read nothing."""
    if trace.kind != "twitter":
        return None
    from profiling.paths import shared_data_dir

    return shared_data_dir(override)


REQUEST_START = "X-Request-Start"
HELD_OUT_ITEMS = 512  # the test examples a run cycles through (payloads_from_model)


def request_start_value(unix_s: float) -> str:
    """The header value for a request sent at `unix_s` (wall clock, so the server can compare
    it with its own; microseconds, as the convention writes them)."""
    return f"t={unix_s:.6f}"


def retry_after_s(value: str | None) -> float | None:
    """Seconds of a Retry-After header in its delta-seconds form; None if absent or a date."""
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Payload:
    """One prebuilt request body and the true labels of its items (None where unknown)."""

    body: bytes
    labels: tuple[int | None, ...]


@dataclass(frozen=True)
class LoadResult:
    config: LoadgenConfig
    records: list[RequestRecord]
    summary: LoadSummary
    series: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "summary": self.summary.to_dict(),
                "timeseries": self.series, "wall_s": self.wall_s,
                "records": [r.to_dict() for r in self.records]}


def build_payloads(items: list[tuple[dict[str, Any], int | None]], cfg: LoadgenConfig,
                   count: int | None = None) -> list[Payload]:
    """Bodies for `count` requests (default: one per example, at least one; with utilities, a
    multiple of their cycle), each holding `cfg.job_size` items taken cyclically from `items`."""
    if not items:
        raise ValueError("no examples to build payloads from")
    n = count if count is not None else max(1, len(items) // cfg.job_size)
    if cfg.utilities:  # call i (payload i % n) then carries call_utility(i)
        n = -(-n // len(cfg.utilities)) * len(cfg.utilities)
    slo: dict[str, Any] = {"latency_ms": cfg.slo_ms}
    if cfg.min_accuracy is not None:
        slo["min_accuracy"] = cfg.min_accuracy
    out = []
    for i in range(n):
        chosen = [items[(i * cfg.job_size + j) % len(items)] for j in range(cfg.job_size)]
        body: dict[str, Any] = {"model": cfg.model, "slo": slo if not cfg.utilities else
                                {**slo, "utility": call_utility(i, cfg.utilities)}}
        if cfg.task is not None:
            body["task"] = cfg.task
        if cfg.job_size == 1:
            body["inputs"] = chosen[0][0]
        else:
            body["items"] = [inputs for inputs, _ in chosen]
        out.append(Payload(json.dumps(body).encode(), tuple(label for _, label in chosen)))
    return out


def _result_record(base: dict[str, Any], res: Any, label: int | None) -> RequestRecord:
    """A record from one ClassifyResponse JSON object."""
    if not isinstance(res, dict) or res.get("status") not in ("ok", "deadline_exceeded", "shed"):
        return RequestRecord(**base, outcome="error", label=label, error=f"bad result: {res!r}"[:200])
    pred = res.get("prediction") or {}
    dec = res.get("decision") or {}
    return RequestRecord(
        **base, outcome=res["status"], label=label,
        predicted=pred.get("label") if res["status"] == "ok" else None,
        variant=dec.get("variant"), batch_size=dec.get("batch_size"),
        queue_ms=dec.get("queue_ms"), compute_ms=dec.get("compute_ms"),
        expected_accuracy=dec.get("expected_accuracy"), replica=dec.get("replica"),
        job_id=res.get("job_id"), error=res.get("error"), server_ms=res.get("latency_ms"),
        dispatch_ms=dec.get("dispatch_ms"), server_deadline_met=_server_verdict(res, dec))


def _server_verdict(res: dict[str, Any], decision: dict[str, Any]) -> bool | None:
    """Whether the server says it met the deadline: its decision's flag for an answer, False
    for its own deadline_exceeded, None where it says nothing (shed)."""
    if res["status"] == "deadline_exceeded":
        return False
    met = decision.get("deadline_met")
    return met if isinstance(met, bool) else None


def parse_response(base: dict[str, Any], status: int, text: bytes, payload: Payload,
                   is_job: bool, retry_after: float | None = None) -> list[RequestRecord]:
    """Records (one per item) from an HTTP answer; anything unexpected is an "error" record."""
    n = len(payload.labels)
    if status in REFUSAL_STATUSES:  # before parsing: Serve's proxy refuses in plain text
        return [RequestRecord(**{**base, "index": base["index"] + j}, outcome="refused",
                              label=payload.labels[j], retry_after_s=retry_after,
                              error=text[:200].decode("utf-8", errors="replace"))
                for j in range(n)]

    def errors(msg: str) -> list[RequestRecord]:
        return [RequestRecord(**{**base, "index": base["index"] + j}, outcome="error",
                              label=payload.labels[j], error=msg[:300]) for j in range(n)]

    try:
        data = json.loads(text)
    except ValueError:
        return errors(f"HTTP {status}: unparsable body {text[:120]!r}")
    if status != 200:
        err = data.get("error", {}) if isinstance(data, dict) else {}
        return errors(f"HTTP {status}: {err.get('type', '')}: {err.get('message', data)}")
    results = data.get("results") if is_job and isinstance(data, dict) else [data]
    if not isinstance(results, list) or len(results) != n:
        return errors(f"expected {n} results, got {str(data)[:120]}")
    job_id = data.get("job_id") if is_job else None
    out = []
    for j, res in enumerate(results):
        rec = _result_record({**base, "index": base["index"] + j}, res, payload.labels[j])
        out.append(rec if job_id is None else RequestRecord(**{**rec.to_dict(), "job_id": job_id}))
    return out


async def _send(session: aiohttp.ClientSession, cfg: LoadgenConfig, payload: Payload,
                index: int, scheduled_s: float, lag_ms: float) -> list[RequestRecord]:
    sent_s = scheduled_s + lag_ms / 1000.0
    start = time.perf_counter()
    base: dict[str, Any] = {"index": index, "scheduled_s": scheduled_s, "sent_s": sent_s}
    n = len(payload.labels)
    headers = {"content-type": "application/json"}
    if cfg.request_start_header:
        headers[REQUEST_START] = request_start_value(time.time())
    try:
        async with session.post(cfg.endpoint(), data=payload.body, headers=headers) as resp:
            text = await resp.read()
            status = resp.status
            retry_after = retry_after_s(resp.headers.get("Retry-After"))
    except TimeoutError:
        return [RequestRecord(**{**base, "index": index + j}, outcome="timeout",
                              label=payload.labels[j], error="no answer within timeout")
                for j in range(n)]
    except (aiohttp.ClientError, OSError) as exc:
        return [RequestRecord(**{**base, "index": index + j}, outcome="error",
                              label=payload.labels[j], error=f"{type(exc).__name__}: {exc}"[:300])
                for j in range(n)]
    base["latency_ms"] = 1000.0 * (time.perf_counter() - start)
    base["status_code"] = status
    return parse_response(base, status, text, payload, cfg.job_size > 1, retry_after)


async def run_load_async(cfg: LoadgenConfig, payloads: list[Payload]) -> LoadResult:
    if not payloads:
        raise ValueError("no payloads")
    arrivals = arrival_times(cfg.trace, cfg.data_dir).tolist()
    connector = aiohttp.TCPConnector(limit=cfg.max_connections, limit_per_host=0,
                                     force_close=False)
    timeout = aiohttp.ClientTimeout(total=cfg.request_timeout_s)
    wall0 = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        def send(i: int, t: float, lag_ms: float) -> Awaitable[list[RequestRecord]]:
            return _send(session, cfg, payloads[i % len(payloads)], i * cfg.job_size, t, lag_ms)

        batches = await open_loop(arrivals, send, start_delay_s=cfg.start_delay_s)
    records = [r for batch in batches for r in batch]
    summary = summarize(records, cfg.trace.duration_s, cfg.slo_ms)
    return LoadResult(cfg, records, summary,
                      timeseries(records, cfg.trace.duration_s, cfg.slo_ms),
                      time.perf_counter() - wall0)


def run_load(cfg: LoadgenConfig, payloads: list[Payload]) -> LoadResult:
    """Replay the trace against `cfg.url` (blocking); see module doc."""
    return asyncio.run(run_load_async(cfg, payloads))


def payloads_from_model(cfg: LoadgenConfig, limit: int = HELD_OUT_ITEMS,
                        models_dir: str | None = None) -> list[Payload]:
    """Held-out test examples of the model family (wire form, with labels) as payloads."""
    from deployments.models.registry import load_model

    model = (load_model(cfg.model) if models_dir is None
             else load_model(cfg.model, cache_dir=Path(models_dir)))
    task = cfg.task or model.tasks()[0]
    examples = model.examples("test", task, limit=limit)
    return build_payloads([(e.inputs, e.label) for e in examples], cfg)


def format_summary(s: LoadSummary) -> str:
    share = ", ".join(f"{v} {100 * x:.1f}%" for v, x in s.variant_share.items()) or "-"
    rows = [
        ("sent", f"{s.sent} ({s.offered_qps:.1f}/s over {s.duration_s:g} s)"),
        ("answered", f"{s.answered}"),
        ("ok", f"{s.ok}"),
        ("deadline_exceeded", f"{s.deadline_exceeded}"),
        ("shed", f"{s.shed}"),
        ("refused", f"{s.refused}"),
        ("errors / timeouts", f"{s.errors} / {s.timeouts}"),
        ("goodput", f"{s.goodput_qps:.2f} ok-within-SLO/s ({s.satisfied} answers)"),
        ("SLO attainment", f"{100 * s.slo_attainment:.2f}% of sent, "
                           f"{100 * s.slo_attainment_admitted:.2f}% of admitted"),
        ("accuracy of satisfied", f"{s.accuracy_of_satisfied:.4f} measured, "
                                  f"{s.expected_accuracy_of_satisfied:.4f} expected"),
        ("latency p50/p95/p99", f"{s.latency_p50_ms:.1f} / {s.latency_p95_ms:.1f} / "
                                f"{s.latency_p99_ms:.1f} ms (ok answers; SLO {s.slo_ms:g} ms)"),
        ("overhead p50", f"{s.overhead_p50_ms:.1f} ms (latency - compute)"),
        ("mean batch size", f"{s.mean_batch_size:.2f}"),
        ("max send lag", f"{s.max_send_lag_ms:.1f} ms"),
        ("variant usage", share),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)
