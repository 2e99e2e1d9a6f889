"""The live autoscaling burst demo (python -m bench autoscaling-burst, docs/data_autoscale_burst.json)
replayed in the simulator: the same requests, the live path in front of the stages (live_path.py),
the policy the Serve hooks run (policies.autoscaling through app/sim/generation/autoscale.py's
`Autoscaler`), and the loads as Serve hands them to it (`ServeTiming`): each replica's arrival
meter (`rate_window_s`) is pushed every `metrics_interval_s`, Serve averages the pushes of the
last `look_back_period_s`, and its controller calls the policy every `control_period_s` (0.1 s).
A replica asked for serves `startup_s` later: the live demo's own, measured from its series
(`measured_startup_s`), not the policy's assumption.

`replica_counts` samples the simulated pools at the live samples' times; `compare_counts` says
how far apart the two are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.sim.generation.autoscale import METERS, Autoscaler, MeteredSim, Tick
from app.sim.generation.sim import GenerationSim
from bench.experiments.fidelity.generation.live_path import LiveGenerationSim
from policies.autoscaling import ENCODER, LLM, StageLoads

STAGES = (ENCODER, LLM)


class LiveMeteredSim(LiveGenerationSim, MeteredSim):
    """The live path in front of the stages, and the stages' arrival meters (after the path:
    a replica counts a call when it arrives)."""


@dataclass(frozen=True)
class ServeTiming:
    control_period_s: float = 0.1  # Serve's controller loop
    metrics_interval_s: float = 0.5
    look_back_period_s: float = 2.0
    rate_window_s: float = 2.0

    def __post_init__(self) -> None:
        if min(self.control_period_s, self.metrics_interval_s, self.rate_window_s) <= 0 \
                or self.look_back_period_s <= self.metrics_interval_s:
            raise ValueError(f"need periods > 0 and look_back_period_s > metrics_interval_s: "
                             f"{self}")


class ServeAutoscaler(Autoscaler):
    """`Autoscaler` whose loads are Serve's: the meters' rates pushed every
    `metrics_interval_s`, averaged over the pushes of the last `look_back_period_s`."""

    def __init__(self, *args: Any, timing: ServeTiming, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timing = timing
        self.pushes: list[tuple[float, dict[str, float]]] = []
        self._next_push_s = 0.0

    def loads(self, sim: MeteredSim, now_s: float) -> StageLoads:
        t = self.timing
        while self._next_push_s <= now_s + 1e-9:
            self.pushes.append((self._next_push_s, {name: sim.meters[name].rate(
                self._next_push_s) for name in METERS}))
            self._next_push_s += t.metrics_interval_s
        recent = [r for at, r in self.pushes if at > now_s - t.look_back_period_s]
        r = {name: sum(p[name] for p in recent) / len(recent) if recent else 0.0
             for name in METERS}
        return StageLoads(r[METERS[0]], r[METERS[1]], r[METERS[2]])


def measured_startup_s(rows: Sequence[Mapping[str, Any]], stage: str) -> float | None:
    """Median seconds from a live target increase to the running count reaching it (the
    demo's series: {"t_s", stage: {"running", "target"}}); None without a completed one."""
    waits = []
    prev_target = None
    for i, row in enumerate(rows):
        target = row[stage].get("target")
        if prev_target is not None and target is not None and target > prev_target:
            done = next((r["t_s"] for r in rows[i:] if r[stage]["running"] >= target), None)
            if done is not None:
                waits.append(done - row["t_s"])
        prev_target = target if target is not None else prev_target
    if not waits:
        return None
    waits.sort()
    mid = len(waits) // 2
    return waits[mid] if len(waits) % 2 else (waits[mid - 1] + waits[mid]) / 2.0


def replica_counts(sim: GenerationSim, ticks: Sequence[Tick], times_s: Sequence[float],
                   offset_s: float = 0.0) -> list[dict[str, Any]]:
    """Per time (the live samples', in the live run's clock; the simulation's clock is that +
    `offset_s`): each stage's running (ready) replicas and target."""
    logs = {s: p.log for s, p in sim.pools().items()}
    out = []
    k = 0
    for t in times_s:
        now = t + offset_s
        while k + 1 < len(ticks) and ticks[k + 1].time_s <= now + 1e-9:
            k += 1
        row: dict[str, Any] = {"t_s": t}
        for stage, log in logs.items():
            ready = next((r for at, r, _ in reversed(log) if at <= now + 1e-9), log[0][1])
            target = ticks[k].target.get(stage) if ticks and ticks[0].time_s <= now else None
            row[stage] = {"running": ready, "target": target}
        out.append(row)
    return out


def _first_time(rows: Sequence[Mapping[str, Any]], stage: str, above: int) -> float | None:
    return next((r["t_s"] for r in rows if (r[stage]["target"] or 0) > above), None)


def compare_counts(live: Sequence[Mapping[str, Any]], sim: Sequence[Mapping[str, Any]]
                   ) -> dict[str, Any]:
    """Per stage: peak running / target, first scale-up, last time above the start, the share
    of samples with the same running count, the mean |running difference|."""
    out: dict[str, Any] = {}
    for stage in STAGES:
        if not live or stage not in live[0] or stage not in sim[0]:
            continue
        start = live[0][stage]["running"]
        pairs = list(zip(live, sim, strict=True))
        diffs = [abs(a[stage]["running"] - b[stage]["running"]) for a, b in pairs]
        out[stage] = {
            side + "_" + key: value for side, rows in (("live", live), ("sim", sim))
            for key, value in (
                ("peak_running", max(r[stage]["running"] for r in rows)),
                ("peak_target", max((r[stage]["target"] or 0) for r in rows)),
                ("first_up_s", _first_time(rows, stage, start)),
                ("last_above_start_s", next((r["t_s"] for r in reversed(rows)
                                             if r[stage]["running"] > start), None)))}
        out[stage]["same_running_share"] = sum(d == 0 for d in diffs) / len(diffs)
        out[stage]["mean_abs_running_diff"] = sum(diffs) / len(diffs)
        out[stage]["max_abs_running_diff"] = max(diffs)
    return out


@dataclass(frozen=True)
class Replay:
    rows: list[dict[str, Any]]  # replica_counts at the live sample times
    ticks: list[Tick]
    sim: LiveMeteredSim


def replay(sim: LiveMeteredSim, scaler: ServeAutoscaler, times_s: Sequence[float],
           offset_s: float) -> Replay:
    """Run `sim` with `scaler` called every control period until the last live sample."""
    end = (max(times_s) if times_s else 0.0) + offset_s
    sim.every(scaler.timing.control_period_s, scaler, until_s=end)
    sim.run()
    return Replay(replica_counts(sim, scaler.ticks, times_s, offset_s), scaler.ticks, sim)
