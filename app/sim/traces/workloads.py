"""Workloads: arrival-time traces for the simulator and the load generator.

- Twitter (RAMSIS's 27-point slice): a QPS per 10-s step, replayed as RAMSIS does, one rate per
  simulated second (each value held for 10 s, wrapping around), Poisson arrivals inside each step.
- Constant-rate Poisson.
- Azure LLM 2023 CSVs (TIMESTAMP, ContextTokens, GeneratedTokens): real arrival times.
All generators are seeded (numpy Generator) and return a `Workload`. The loaders take the shared
data directory (`python -m bench ramsis --data-dir`; profiling.paths.shared_data_dir() by default)
from their caller: the simulator works no paths out itself.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

TWITTER_TRACE = Path("ramsis/twitter_trace/twitter_04_25_norm.txt")
AZURE_LLM_TRACES = Path("traces/azure_llm_2023")


@dataclass(frozen=True)
class Workload:
    """Sorted arrival times (seconds from 0) plus optional per-request columns."""

    name: str
    arrivals_s: NDArray[Any]
    duration_s: float
    columns: dict[str, NDArray[Any]] = field(default_factory=dict)

    @property
    def num_requests(self) -> int:
        return int(self.arrivals_s.size)

    def mean_qps(self) -> float:
        return self.num_requests / self.duration_s if self.duration_s > 0 else 0.0


def piecewise_poisson(rates_qps: NDArray[Any], step_s: float, seed: int, name: str) -> Workload:
    """Poisson arrivals whose rate is `rates_qps[k]` during [k*step_s, (k+1)*step_s)."""
    rng = np.random.default_rng(seed)
    chunks = []
    for k, rate in enumerate(rates_qps):
        count = rng.poisson(rate * step_s)
        chunks.append(np.sort(rng.uniform(k * step_s, (k + 1) * step_s, size=count)))
    arrivals = np.concatenate(chunks) if chunks else np.empty(0)
    return Workload(name, arrivals, float(len(rates_qps) * step_s))


def constant_poisson(qps: float, duration_s: float, seed: int = 0) -> Workload:
    if qps <= 0 or duration_s <= 0:
        raise ValueError(f"need positive qps and duration, got {qps}, {duration_s}")
    return piecewise_poisson(np.array([qps]), duration_s, seed, f"poisson-{qps:g}qps")


def data_file(data_dir: Path, relative: Path) -> Path:
    """`data_dir / relative`, or a FileNotFoundError that says which directory was searched."""
    path = Path(data_dir) / relative
    if not path.is_file():
        raise FileNotFoundError(f"{relative} not found under the shared data directory "
                                f"{data_dir} (pass it with --data-dir)")
    return path


def load_twitter_steps(data_dir: Path) -> NDArray[Any]:
    """The trace's QPS values, one per 10-s step."""
    path = data_file(data_dir, TWITTER_TRACE)
    values = [float(line.split()[1]) for line in path.read_text().splitlines() if line.strip()]
    if not values:
        raise ValueError(f"empty trace: {path}")
    return np.array(values)


def twitter_rates_per_second(data_dir: Path, duration_s: int = 300,
                             scale: float = 1.0) -> NDArray[Any]:
    """RAMSIS's replay: each step value held for 10 one-second entries (261 entries: the last
    point once), wrapped around to cover `duration_s`, times `scale`."""
    steps = load_twitter_steps(data_dir)
    per_second = np.concatenate([np.repeat(steps[:-1], 10), steps[-1:]])
    reps = int(np.ceil(duration_s / per_second.size))
    return np.tile(per_second, reps)[:duration_s] * scale


def twitter_trace(data_dir: Path, duration_s: int = 300, scale: float = 1.0,
                  seed: int = 0) -> Workload:
    rates = twitter_rates_per_second(data_dir, duration_s, scale)
    return piecewise_poisson(rates, 1.0, seed, f"twitter-x{scale:g}")


def rescaled_twitter_rates(data_dir: Path, min_qps: float, max_qps: float,
                           duration_s: int = 300) -> NDArray[Any]:
    """The Twitter shape mapped linearly onto [min_qps, max_qps]."""
    rates = twitter_rates_per_second(data_dir, duration_s, 1.0)
    lo, hi = rates.min(), rates.max()
    return min_qps + (rates - lo) * (max_qps - min_qps) / (hi - lo)


def azure_llm_trace(data_dir: Path, kind: str = "conv", limit: int | None = None) -> Workload:
    """Azure LLM inference 2023 (`kind` "code" or "conv"): arrivals and token counts."""
    if kind not in ("code", "conv"):
        raise ValueError(f"unknown Azure LLM trace {kind!r}; valid: ['code', 'conv']")
    path = data_file(data_dir, AZURE_LLM_TRACES / f"AzureLLMInferenceTrace_{kind}.csv")
    stamps, ctx, gen = [], [], []
    with open(path) as fh:
        for row in csv.DictReader(fh):
            stamps.append(_parse_timestamp(row["TIMESTAMP"]))
            ctx.append(int(row["ContextTokens"]))
            gen.append(int(row["GeneratedTokens"]))
            if limit is not None and len(stamps) >= limit:
                break
    t = np.array(stamps)
    order = np.argsort(t, kind="stable")
    arrivals = t[order] - t[order][0]
    return Workload(f"azure-llm-{kind}", arrivals, float(arrivals[-1]) if arrivals.size else 0.0,
                    {"context_tokens": np.array(ctx)[order], "generated_tokens": np.array(gen)[order]})


def _parse_timestamp(text: str) -> float:
    # e.g. "2023-11-16 18:15:46.6805900": more than 6 fractional digits for datetime.
    head, _, frac = text.strip().partition(".")
    base = datetime.fromisoformat(head).timestamp()
    return base + (float("0." + frac) if frac else 0.0)
