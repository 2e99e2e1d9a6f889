"""The figures of a generation run, from the client's records (pure: no I/O).

Percentiles are nearest-rank (the P99 of 100 values is the 99th smallest). TTFT and TBT
percentiles are over the requests answered `ok`; `ttft_p99_all_ms` counts every other request
as an infinite TTFT, so it is within the SLO only when at least 99% of all requests sent were
answered within it. SLO attainment is over the requests sent (an error is a miss). Accuracy is
exact match of the answer text over the requests answered `ok` that carry no earlier turns (the
held-out accuracy of the model card: the VLM is trained on single turns, and earlier turns, which
make the prompt lengths heavy-tailed, throw its answers off whatever the load);
`accuracy_with_history` is the same over the others, for comparison between loads only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from bench.core.stats import percentile


class Record(Protocol):
    @property
    def status(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def correct(self) -> bool: ...
    @property
    def ttft_ms(self) -> float | None: ...
    @property
    def tbt_ms(self) -> tuple[float, ...]: ...
    @property
    def e2e_ms(self) -> float | None: ...
    @property
    def send_lag_ms(self) -> float: ...
    @property
    def task(self) -> str: ...
    @property
    def history_turns(self) -> int: ...


@dataclass(frozen=True)
class RunStats:
    system: str
    rate_rps: float
    duration_s: float
    sent: int
    ok: int
    errors: dict[str, int]
    correct: int
    accuracy: float | None  # correct / ok, requests without earlier turns
    accuracy_with_history: float | None  # the same, requests with earlier turns
    slo_attainment: float | None  # ok within the TTFT SLO / sent
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    ttft_p99_all_ms: float | None  # failures as infinite TTFT
    tbt_p50_ms: float | None
    tbt_p99_ms: float | None
    e2e_p50_ms: float | None
    e2e_p99_ms: float | None
    send_lag_p99_ms: float | None
    accuracy_by_task: dict[str, float | None]
    ttft_p50_by_task_ms: dict[str, float | None]
    ttft_p99_by_task_ms: dict[str, float | None]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_stats(system: str, rate_rps: float, duration_s: float, records: Sequence[Record],
              slo_ms: float) -> RunStats:
    ok = [r for r in records if r.ok]
    ttft = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    within = sum(1 for t in ttft if t <= slo_ms)
    all_ttft = [r.ttft_ms if r.ok and r.ttft_ms is not None else math.inf for r in records]
    tbt = [g for r in ok for g in r.tbt_ms]
    e2e = [r.e2e_ms for r in ok if r.e2e_ms is not None]
    single = [r for r in ok if r.history_turns == 0]
    multi = [r for r in ok if r.history_turns > 0]
    correct = sum(1 for r in single if r.correct)
    by_task: dict[str, float | None] = {}
    p50: dict[str, float | None] = {}
    p99: dict[str, float | None] = {}
    for task in sorted({r.task for r in records}):
        answered = [r for r in ok if r.task == task]
        scored = [r for r in single if r.task == task]
        by_task[task] = sum(1 for r in scored if r.correct) / len(scored) if scored else None
        times = [r.ttft_ms for r in answered if r.ttft_ms is not None]
        p50[task], p99[task] = percentile(times, 50), percentile(times, 99)
    return RunStats(system, rate_rps, duration_s, len(records), len(ok),
                    dict(Counter(r.status for r in records if not r.ok)), correct,
                    correct / len(single) if single else None,
                    sum(1 for r in multi if r.correct) / len(multi) if multi else None,
                    within / len(records) if records else None,
                    percentile(ttft, 50), percentile(ttft, 99), percentile(all_ttft, 99),
                    percentile(tbt, 50), percentile(tbt, 99), percentile(e2e, 50),
                    percentile(e2e, 99), percentile((r.send_lag_ms for r in records), 99),
                    by_task, p50, p99)


def meets_slo(s: RunStats, slo_ms: float) -> bool:
    """P99 TTFT over every request sent (failures infinite) within the SLO."""
    return s.sent > 0 and s.ttft_p99_all_ms is not None and s.ttft_p99_all_ms <= slo_ms


def max_load_under_slo(ramp: Sequence[RunStats], slo_ms: float) -> float | None:
    """The highest rate of the ramp's unbroken run of SLO-meeting rates from the lowest up
    (a lucky pass above a failed rate does not count); None when the lowest fails."""
    best = None
    for s in sorted(ramp, key=lambda x: x.rate_rps):
        if not meets_slo(s, slo_ms):
            break
        best = s.rate_rps
    return best


def knee(ramp: Sequence[RunStats], slo_ms: float) -> float | None:
    """The lowest rate whose P99 TTFT (failures infinite) crosses the SLO; None if none does."""
    for s in sorted(ramp, key=lambda x: x.rate_rps):
        if not meets_slo(s, slo_ms):
            return s.rate_rps
    return None


def at_rate(ramp: Sequence[RunStats], rate: float | None) -> RunStats | None:
    return next((s for s in ramp if rate is not None and math.isclose(s.rate_rps, rate)), None)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else a / b


def _p99(s: RunStats | None) -> float | None:
    return None if s is None else s.ttft_p99_all_ms


def _le(a: float | None, b: float | None, factor: float = 1.0) -> bool | None:
    if a is None or b is None:
        return None
    return a <= factor * b


def checks(ramps: Mapping[str, Sequence[RunStats]], slo_ms: float, full: str = "full",
           monolith: str = "monolith", peers: Sequence[str] = ("vllm-serve", "ray-serve-llm"),
           accuracy_drop: float = 0.02) -> dict[str, Any]:
    """The issue's claims, each True/False, or None where a system or figure is missing."""
    out: dict[str, Any] = {"figures": {}, "pass": {}}
    fig, ok = out["figures"], out["pass"]
    loads = {n: max_load_under_slo(r, slo_ms) for n, r in ramps.items()}
    fig["max_load_under_slo_rps"] = loads
    k = knee(ramps.get(monolith, ()), slo_ms)
    fig["monolith_knee_rps"] = k
    full_k, mono_k = at_rate(ramps.get(full, ()), k), at_rate(ramps.get(monolith, ()), k)
    fig["p99_ttft_at_knee_ms"] = {n: _p99(at_rate(r, k)) for n, r in ramps.items()}
    reduction = _ratio(_p99(full_k), _p99(mono_k))
    ok["full_p99_ttft_30pct_below_monolith_at_knee"] = (None if reduction is None
                                                        else reduction <= 0.7)
    top = {n: max((s.rate_rps for s in r), default=None) for n, r in ramps.items()}
    ok["full_higher_max_load_than_monolith"] = _gt_load(loads, top, full, monolith)
    light = {n: min(r, key=lambda x: x.rate_rps) for n, r in ramps.items() if r}
    fig["light_load_ttft_p50_ms"] = {n: s.ttft_p50_ms for n, s in light.items()}
    base = light.get("vllm-serve")
    fig["light_load_ttft_p50_x_vllm"] = {  # Serve's floor systems (gen_floor.py) included
        n: _ratio(s.ttft_p50_ms, base.ttft_p50_ms if base else None) for n, s in light.items()}
    for name, factor in ((monolith, 1.2), ("decoupled", 1.3), (full, 1.3)):
        ok[f"{name}_light_ttft_within_{factor:g}x_vllm"] = _le(
            light[name].ttft_p50_ms if name in light else None,
            base.ttft_p50_ms if base else None, factor)
    for peer in peers:
        ok[f"full_beats_{peer}_p99_ttft_at_knee"] = _lt(_p99(full_k),
                                                        _p99(at_rate(ramps.get(peer, ()), k)))
        ok[f"full_higher_max_load_than_{peer}"] = _gt_load(loads, top, full, peer)
    fig["accuracy"] = {n: {f"{s.rate_rps:g}": s.accuracy for s in r} for n, r in ramps.items()}
    ok["accuracy_unchanged_under_load"] = _accuracy_holds(ramps, light, accuracy_drop)
    return out


def _lt(a: float | None, b: float | None) -> bool | None:
    if a is None or b is None:
        return None
    return a < b or (math.isinf(b) and not math.isinf(a))


def _gt_load(loads: Mapping[str, float | None], top: Mapping[str, float | None], a: str,
             b: str) -> bool | None:
    """Whether `a` sustained a higher load under the SLO than `b`; None when unknown: a
    system missing, or `a` met the SLO at every rate it ran and `b` got as far (the ramp
    did not find `a`'s limit)."""
    if a not in loads or b not in loads:
        return None
    la, lb = loads[a], loads[b]
    if la is None:
        return False
    if lb is None or la > lb:
        return True
    return None if la == top[a] else False


def _accuracy_holds(ramps: Mapping[str, Sequence[RunStats]], light: Mapping[str, RunStats],
                    drop: float) -> bool | None:
    """Every run's accuracy within `drop` of its own system's light-load run."""
    verdicts = []
    for name, ramp in ramps.items():
        ref = light[name].accuracy if name in light else None
        for s in ramp:
            if ref is not None and s.accuracy is not None:
                verdicts.append(s.accuracy >= ref - drop)
    return all(verdicts) if verdicts else None


STAGE_SERIES = "adaptserve_chat_stage_seconds"


def stage_totals(prometheus_text: str) -> dict[str, tuple[float, float]]:
    """{"path/stage": (sum seconds, count)} of our ingress's `adaptserve_chat_stage_seconds`
    (deployments/ingress/metrics.py) in a /metrics page; {} where there is none."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(prometheus_text):
        for sample in family.samples:
            k = {STAGE_SERIES + "_sum": 0, STAGE_SERIES + "_count": 1}.get(sample.name)
            if k is not None:
                key = f"{sample.labels['path']}/{sample.labels['stage']}"
                out.setdefault(key, [0.0, 0.0])[k] = float(sample.value)
    return {key: (v[0], v[1]) for key, v in out.items()}


def stage_means_ms(before: dict[str, tuple[float, float]],
                   after: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Mean ms per stage of the requests between two scrapes."""
    out = {}
    for key, (total, count) in after.items():
        t0, c0 = before.get(key, (0.0, 0.0))
        if count > c0:
            out[key] = round((total - t0) / (count - c0) * 1000.0, 3)
    return out
