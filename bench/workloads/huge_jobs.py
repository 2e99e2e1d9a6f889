"""The huge jobs of the huge-jobs benchmark (bench/experiments/huge_jobs/run.py): their bodies (1024x1024
PNGs, blank or random noise), the clients that send them back to back, and a sampler of the
Serve processes' CPU time while they run.

- blank: an all-black 1024x1024 RGB PNG (~4 KB in base64) per item, `http.max_items_per_job`
  items: tiny on the wire, ~10 ms of decoding each (inflate 3 MB, to grey, resize);
- noisy: distinct random-noise 1024x1024 grey PNGs (~1.4 MB in base64 each, the largest image
  size the wire takes), as many as fit `http.max_body_bytes`: heavy on the wire and the parser.

A client sends its job, waits for the answer, and sends it again until its time is up; a 429 or
503 is waited out for its Retry-After, as a well-behaved client does (`honour_retry_after`).
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp
import numpy as np

from bench.core.answers import REFUSAL_STATUSES, error_type
from bench.core.client import REQUEST_START, request_start_value, retry_after_s

KINDS = ("blank", "noisy")
SIDE = 1024
JSON_OVERHEAD_BYTES = 1024  # the body's envelope besides its images
CLIENT_TIMEOUT_S = 120.0


def png_b64(pixels: np.ndarray) -> str:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(pixels, mode="RGB" if pixels.ndim == 3 else "L").save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def job_images(kind: str, max_items: int, max_body_bytes: int, seed: int = 0) -> list[str]:
    """The images of one job of `kind`: as many as the item cap and the body limit allow."""
    if kind == "blank":
        return [png_b64(np.zeros((SIDE, SIDE, 3), dtype=np.uint8))] * max_items
    if kind != "noisy":
        raise ValueError(f"unknown job kind {kind!r}; valid: {list(KINDS)}")
    rng = np.random.default_rng(seed)
    first = png_b64(rng.integers(0, 256, (SIDE, SIDE), dtype=np.uint8))
    per_item = len(first) + len('{"image": ""}, ')
    count = max(1, min(max_items, (max_body_bytes - JSON_OVERHEAD_BYTES) // per_item))
    return [first] + [png_b64(rng.integers(0, 256, (SIDE, SIDE), dtype=np.uint8))
                      for _ in range(count - 1)]


def job_body(model: str, images: list[str], slo_ms: float) -> bytes:
    return json.dumps({"model": model, "items": [{"image": im} for im in images],
                       "slo": {"latency_ms": slo_ms}}).encode()


@dataclass(frozen=True)
class JobRecord:
    """One job sent; times are wall-clock seconds. `outcomes`: item status -> count for an
    answered job (ok, deadline_exceeded, shed), else {"refused" | "http_<code>" | "error": n}."""

    client: int
    sent_s: float
    answered_s: float
    status_code: int  # 0: no HTTP answer
    items: int
    outcomes: dict[str, int]
    error_type: str | None = None
    retry_after_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def job_outcomes(status: int, body: bytes, items: int) -> tuple[dict[str, int], str | None]:
    """Item outcomes and the error type of a /v1/jobs answer."""
    if status in REFUSAL_STATUSES:
        return {"refused": items}, error_type(body)
    if status != 200:
        return {f"http_{status}": items}, error_type(body)
    try:
        results = json.loads(body)["results"]
        counts = Counter(str(r["status"]) for r in results)
    except (ValueError, KeyError, TypeError):
        return {"error": items}, "bad_answer"
    if sum(counts.values()) != items:
        return {"error": items}, f"{sum(counts.values())} results for {items} items"
    return dict(counts), None


async def send_job(session: aiohttp.ClientSession, url: str, body: bytes, items: int,
                   client: int) -> JobRecord:
    sent = time.time()
    headers = {"content-type": "application/json", REQUEST_START: request_start_value(sent)}
    try:
        async with session.post(url.rstrip("/") + "/v1/jobs", data=body, headers=headers) as r:
            raw, status = await r.read(), r.status
            retry = retry_after_s(r.headers.get("Retry-After"))
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        return JobRecord(client, sent, time.time(), 0, items, {"error": items},
                         type(exc).__name__)
    outcomes, error_type = job_outcomes(status, raw, items)
    return JobRecord(client, sent, time.time(), status, items, outcomes, error_type, retry)


async def job_client(session: aiohttp.ClientSession, url: str, body: bytes, items: int,
                     client: int, until_s: float, honour_retry_after: bool) -> list[JobRecord]:
    """The same job back to back until `until_s` (wall clock); refusals waited out."""
    out: list[JobRecord] = []
    while time.time() < until_s:
        rec = await send_job(session, url, body, items, client)
        out.append(rec)
        pause = 0.0
        if rec.status_code in REFUSAL_STATUSES and honour_retry_after:
            pause = rec.retry_after_s or 1.0
        elif rec.status_code == 0:
            pause = 0.5
        if pause:
            await asyncio.sleep(min(pause, max(0.0, until_s - time.time())))
    return out


@dataclass(frozen=True)
class JobPlan:
    """What the job clients of one phase send."""

    url: str
    body: bytes
    items: int
    clients: int
    duration_s: float
    over_cap_body: bytes  # a job one item over the cap, sent once per phase (413 expected)
    over_cap_items: int
    honour_retry_after: bool = True


async def run_jobs(plan: JobPlan, start_s: float) -> tuple[list[JobRecord], JobRecord]:
    """Every client's jobs from `start_s` (wall clock) for the plan's duration, and the
    over-cap job sent once at the start."""
    await asyncio.sleep(max(0.0, start_s - time.time()))
    timeout = aiohttp.ClientTimeout(total=CLIENT_TIMEOUT_S)
    connector = aiohttp.TCPConnector(limit=plan.clients + 2)
    until = start_s + plan.duration_s
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        over = asyncio.create_task(send_job(session, plan.url, plan.over_cap_body,
                                            plan.over_cap_items, -1))
        per_client = await asyncio.gather(*(
            job_client(session, plan.url, plan.body, plan.items, c, until,
                       plan.honour_retry_after) for c in range(plan.clients)))
        return [r for recs in per_client for r in recs], await over
