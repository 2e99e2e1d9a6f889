"""Arithmetic the reliability report (bench/experiments/reliability/report.py and
bench/experiments/reliability/report_ops.py) shares; pure.

A single request's record is the load generator's `RequestRecord` as a dict; its times are
seconds since its phase's load started (`sent_s`), plus its client latency (`latency_ms`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.sim.replica.request_metrics import RequestRecord, summarize
from bench.core.stats import share_text

Rec = dict[str, Any]
Samples = Sequence[tuple[float, dict[str, float]]]
INGRESS_PREFIX = "ServeReplica:adaptserve:Ingress"
PROXY_PREFIX = "ProxyActor"
CLASSIFIER_PREFIX = "ServeReplica:adaptserve:Classifier_"
_TYPE = re.compile(r'"type"\s*:\s*"([A-Za-z_]+)"')
_HTTP = re.compile(r"^HTTP \d+: ([A-Za-z_]+):")


@dataclass(frozen=True)
class Row:
    row: str
    target: str
    measured: str
    passed: bool | None  # None: a baseline, nothing to pass

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def memory_groups(rss_mib: dict[str, float]) -> dict[str, float]:
    """{"proxy", "ingress"} RSS (MiB, summed over processes) from {actor title: RSS}."""
    out = {"proxy": 0.0, "ingress": 0.0}
    for actor, rss in rss_mib.items():
        if actor.startswith(PROXY_PREFIX):
            out["proxy"] += rss
        elif actor.startswith(INGRESS_PREFIX):
            out["ingress"] += rss
    return out


def rss_groups(rss_mib: dict[str, float]) -> dict[str, float]:
    """memory_groups plus each classifier deployment's RSS ("Classifier_<family>", summed
    over its replicas) from {"<actor title>#<pid>": RSS}."""
    out = memory_groups(rss_mib)
    for actor, rss in rss_mib.items():
        if actor.startswith(CLASSIFIER_PREFIX):
            name = actor[len(CLASSIFIER_PREFIX) - len("Classifier_"):].partition("#")[0]
            out[name] = out.get(name, 0.0) + rss
    return out


def attainment(singles: dict[str, list[Rec]], slo_ms: dict[str, float],
               duration_s: float) -> dict[str, float | None]:
    """Per family: answered ok within its SLO, of sent (a refusal is a miss)."""
    out: dict[str, float | None] = {}
    for family, recs in singles.items():
        records = [RequestRecord(**r) for r in recs]
        out[family] = (summarize(records, max(duration_s, 1e-3), slo_ms[family]).slo_attainment
                       if records else None)
    return out


def answer_kind(r: Rec) -> str:
    """What a request got: "200", "<status> <error type>" ("503 unavailable", "429
    overloaded"; the type from the JSON error body, "?" where none), "timeout" or
    "connection error" (no HTTP answer at all)."""
    status = r.get("status_code") or 0
    if not status:
        return "timeout" if r.get("outcome") == "timeout" else "connection error"
    if status == 200:
        return "200"
    err = r.get("error") or ""
    m = _TYPE.search(err) or _HTTP.search(err)
    return f"{status} {m.group(1) if m else '?'}"


def done_s(r: Rec) -> float | None:
    """When the answer came (the phase's clock), None without one."""
    lat = r.get("latency_ms")
    return None if lat is None else float(r["sent_s"]) + lat / 1000.0


def kinds(recs: Iterable[Rec]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in recs:
        k = answer_kind(r)
        out[k] = out.get(k, 0) + 1
    return dict(sorted(out.items()))


def window_mean(samples: Samples, lo_s: float, hi_s: float) -> dict[str, float]:
    """Mean RSS per group over the samples taken in [lo_s, hi_s] (groups seen in any)."""
    chosen = [s for t, s in samples if lo_s <= t <= hi_s]
    groups = sorted({g for s in chosen for g in s})
    out = {}
    for g in groups:
        vals = [s[g] for s in chosen if g in s]
        out[g] = sum(vals) / len(vals)
    return out


def mean_in(series: Sequence[tuple[float, float]], lo_s: float, hi_s: float) -> float | None:
    """Mean of the values taken in [lo_s, hi_s], None when none was."""
    vals = [v for t, v in series if lo_s <= t <= hi_s]
    return sum(vals) / len(vals) if vals else None


def att_text(a: dict[str, float | None]) -> str:
    return ", ".join(f"{f} {share_text(v)}" for f, v in a.items())


def worst_drop_pts(quiet: dict[str, float | None],
                   other: dict[str, float | None]) -> float | None:
    """The largest drop, in points, of any family's attainment from quiet's."""
    drops = []
    for f, q in quiet.items():
        o = other.get(f)
        if q is not None and o is not None:
            drops.append(100 * (q - o))
    return max(drops) if drops else None
