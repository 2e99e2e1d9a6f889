"""The Azure LMM inference trace 2025 (ModServe's production sample, seed 001 §3.2; Azure/
AzurePublicDataset `data/AzureLMMInferenceTrace_multimodal.csv.gz`, CC-BY 4.0, cite Qiu et al.,
SoCC 2025) as generation requests. Schema (shared/data/traces/azure_docs/
AzureLMMInferenceDataset2025.md, SOURCE.md): `TIMESTAMP, NumImages, ContextTokens,
GeneratedTokens`, one row per request; TIMESTAMP is ISO-8601 UTC with milliseconds
(`2024-10-15T12:00:05.819Z`); NumImages = 0 is a text-only request.

ContextTokens includes the image tokens: the copy in shared/ says "Number of context tokens",
the dataset's page on GitHub now says "(including text and image)", and the paper's image-text
requests "have longer median prompts due to image tokens" (§3.2, Figure 11a). Neither names the
tokenizer nor the tokens per image; the rows printed in the dataset's notebook (1-image
requests with 664 to 1,724 ContextTokens) rule out Llama3.2's 1,601 per image. So
`tokens_per_image` is the caller's choice:
text_tokens = max(0, ContextTokens - NumImages * tokens_per_image) (0 keeps ContextTokens whole).
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

import numpy as np

from app.sim.generation.requests import GenRequest
from app.sim.generation.workload import TraceArrays

AZURE_LMM_TRACE = Path("traces/azure_lmm_2025/AzureLMMInferenceTrace_multimodal.csv.gz")
COLUMNS = ("TIMESTAMP", "NumImages", "ContextTokens", "GeneratedTokens")


def parse_timestamp(text: str) -> float:
    """Seconds: a plain number (seconds, fractions allowed) or an ISO-8601 date-time
    ("2024-10-15T12:00:05.819Z", "2023-11-16 18:15:46.6805900", "...+02:00"; no zone = UTC)."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"not a number of seconds or an ISO-8601 time: {text!r}") from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return stamp.timestamp()
    if not math.isfinite(seconds):
        raise ValueError(f"timestamp is not finite: {text!r}")
    return seconds


def _open(path: Path) -> TextIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="")
    return open(path, newline="")


def _count(field: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{field} is not an integer: {text!r}") from None
    if value < 0:
        raise ValueError(f"{field} is negative: {value}")
    return value


def read_rows(path: Path) -> Iterator[tuple[float, int, int, int]]:
    """(seconds, NumImages, ContextTokens, GeneratedTokens) per row, in file order; a bad row is
    a ValueError naming the file and its line."""
    with _open(path) as fh:
        reader = csv.reader(fh)
        header = [name.strip() for name in next(reader, [])]
        missing = [name for name in COLUMNS if name not in header]
        if missing:
            raise ValueError(f"{path}: header {header} lacks columns {missing} "
                             f"(need {list(COLUMNS)})")
        where = [header.index(name) for name in COLUMNS]
        for row in reader:
            if not row or all(not cell.strip() for cell in row):
                continue
            try:
                if len(row) != len(header):
                    raise ValueError(f"{len(row)} fields, the header has {len(header)}")
                stamp, images, context, generated = (row[i] for i in where)
                yield (parse_timestamp(stamp), _count("NumImages", images),
                       _count("ContextTokens", context), _count("GeneratedTokens", generated))
            except ValueError as exc:
                raise ValueError(f"{path}: line {reader.line_num}: {exc}: {row}") from None


def load_azure_lmm_arrays(path: Path, *, tokens_per_image: int, start_s: float = 0.0,
                          end_s: float | None = None, rate_scale: float = 1.0,
                          limit: int | None = None) -> TraceArrays:
    """The trace (CSV, or CSV.gz by suffix), sorted by time. The window [start_s, end_s) is in
    seconds from the earliest request; arrival_s counts from the window's start and is then
    divided by rate_scale (2.0: the same requests in half the time, twice the rate). Rows with
    0 GeneratedTokens become 1 (a request's first token is what TTFT measures). `limit` keeps
    the first rows of the file (before sorting)."""
    if tokens_per_image < 0 or rate_scale <= 0:
        raise ValueError(f"need tokens_per_image >= 0 and rate_scale > 0: "
                         f"{tokens_per_image}, {rate_scale}")
    rows = []
    for row in read_rows(Path(path)):
        rows.append(row)
        if limit is not None and len(rows) >= limit:
            break
    unsorted = np.array(rows, dtype=np.float64).reshape(-1, 4)
    table = unsorted[np.argsort(unsorted[:, 0], kind="stable")]
    since_first = table[:, 0] - (table[0, 0] if len(table) else 0.0)
    stop = math.inf if end_s is None else end_s
    if stop <= start_s:
        raise ValueError(f"empty window: start_s {start_s}, end_s {end_s}")
    keep = (since_first >= start_s) & (since_first < stop)
    kept, arrival = table[keep], (since_first[keep] - start_s) / rate_scale
    images = kept[:, 1].astype(np.int64)
    text = np.maximum(kept[:, 2].astype(np.int64) - images * tokens_per_image, 0)
    last = float(since_first[-1]) if since_first.size else start_s
    duration = max((last if end_s is None else end_s) - start_s, 0.0) / rate_scale
    return TraceArrays(arrival, text, images, np.maximum(kept[:, 3].astype(np.int64), 1),
                       duration_s=duration)


def load_azure_lmm(path: Path, *, tokens_per_image: int, start_s: float = 0.0,
                   end_s: float | None = None, rate_scale: float = 1.0,
                   limit: int | None = None) -> list[GenRequest]:
    """load_azure_lmm_arrays as GenRequest, the simulator's input."""
    return load_azure_lmm_arrays(path, tokens_per_image=tokens_per_image, start_s=start_s,
                                 end_s=end_s, rate_scale=rate_scale, limit=limit).requests()


def azure_lmm_path(data_dir: Path) -> Path:
    """Where the shared data directory keeps the trace (absent from today's snapshot:
    shared/data/traces/SOURCE.md says how to get it)."""
    path = Path(data_dir) / AZURE_LMM_TRACE
    if not path.is_file():
        raise FileNotFoundError(f"{AZURE_LMM_TRACE} not found under the shared data directory "
                                f"{data_dir}; download it as shared/data/traces/SOURCE.md says")
    return path
