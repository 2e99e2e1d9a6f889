"""The front door in the replica simulator: the stack's CPU line and its front stage
(app/sim/replica/front_door.py), the proxy's unchanged ConcurrencyLimiter at each call's send
(app/sim/replica/sim.py), and the resim's calibration from a finished run's records and CPU
figures (bench/experiments/fidelity/classify/single_request.py; no Ray, no model)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from app.sim.replica.front_door import MIN_LEFT_CORES, CpuSample, StackCpu, fit_stack_cpu
from app.sim.replica.parts import FrontStage
from app.sim.replica.request_metrics import RequestRecord, summarize
from app.sim.replica.sim import SchedulerSimConfig, simulate
from app.sim.traces.spec import TraceSpec, arrival_times
from bench.experiments.fidelity.classify.single_request import (
    LiveRun,
    calibrate,
    compare,
    read_runs,
    stack_ms_p50,
)
from bench.experiments.single_request.metrics import front_run
from policies.admission import LimiterSettings
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.schedulers.registry import make_scheduler
from policies.types import Variant


def _profile() -> Profile:
    def pts(ms: dict[int, float]) -> tuple[LatencyPoint, ...]:
        return tuple(LatencyPoint(b, v, v, v, v, 10) for b, v in ms.items())
    return Profile("toy", "cpu", (
        VariantProfile(Variant("small"), 0.70, pts({1: 2.0, 2: 3.0, 4: 5.0, 8: 8.0})),
        VariantProfile(Variant("big"), 0.90, pts({1: 10.0, 2: 12.0, 4: 16.0, 8: 24.0})),
    ))


def _run(arrivals: list[float] | np.ndarray, cfg: SchedulerSimConfig, duration_s: float = 1.0):
    prof = _profile()
    return simulate(prof, lambda k: make_scheduler("most_accurate", prof), np.asarray(arrivals),
                    duration_s, cfg)


# ---- the CPU line -----------------------------------------------------------------------------
def _samples(fixed: float, call_ms: float, refusal_ms: float,
             rates: list[tuple[float, float]]) -> list[CpuSample]:
    return [CpuSample(a, r, fixed + call_ms * a / 1000 + refusal_ms * r / 1000) for a, r in rates]


def test_fit_recovers_the_line_with_and_without_refusals() -> None:
    rates = [(20.0, 0.0), (40.0, 0.0), (80.0, 5.0), (120.0, 60.0), (130.0, 150.0)]
    fit = fit_stack_cpu(_samples(0.3, 9.0, 1.5, rates), cores=2)
    assert (fit.fixed_cores, fit.call_ms, fit.refusal_ms) == pytest.approx((0.3, 9.0, 1.5))
    plain = fit_stack_cpu(_samples(0.3, 9.0, 0.0, [(20.0, 0.0), (60.0, 0.0)]), cores=2)
    assert (plain.fixed_cores, plain.call_ms, plain.refusal_ms) == pytest.approx((0.3, 9.0, 0.0))
    assert plain.busy_cores(100.0) == pytest.approx(1.2)


def test_fit_drops_a_negative_intercept_and_refuses_a_flat_line() -> None:
    # busy cores that fall below the line's origin: the fit goes through the origin instead
    samples = [CpuSample(50.0, 0.0, 0.2), CpuSample(100.0, 0.0, 0.7)]
    fit = fit_stack_cpu(samples, cores=2)
    assert fit.fixed_cores == 0.0
    assert fit.call_ms == pytest.approx(1000 * (50 * 0.2 + 100 * 0.7) / (50**2 + 100**2))
    with pytest.raises(ValueError, match="two samples"):
        fit_stack_cpu([CpuSample(50.0, 0.0, 0.5)], cores=2)
    with pytest.raises(ValueError, match="do not grow"):
        fit_stack_cpu([CpuSample(50.0, 0.0, 0.9), CpuSample(100.0, 0.0, 0.4)], cores=2)


def test_front_stage_time_from_the_cores_left() -> None:
    s = StackCpu(cores=2.0, fixed_cores=0.5, call_ms=6.0, refusal_ms=1.5)
    assert s.front_ms_per_call() == pytest.approx(6.0 / 1.5)
    assert s.capacity_qps() == pytest.approx(250.0)  # where the line meets the two cores
    assert s.busy_cores(s.capacity_qps()) == pytest.approx(2.0)
    assert s.front_ms_per_call(neighbour_cores=0.5) == pytest.approx(6.0)  # a busy neighbour
    assert s.front_ms_per_refusal(0.5) == pytest.approx(1.5)
    assert s.front_ms_per_call(neighbour_cores=5.0) == pytest.approx(6.0 / MIN_LEFT_CORES)


def test_cpu_sample_from_a_run() -> None:
    s = CpuSample.from_run(cpu_ms_per_call=10.0, sent=1000, admitted=800, wall_s=10.0)
    assert (s.admitted_qps, s.refused_qps, s.busy_cores) == pytest.approx((80.0, 20.0, 1.0))
    with pytest.raises(ValueError):
        CpuSample.from_run(10.0, sent=10, admitted=11, wall_s=1.0)


def test_refusal_work_delays_the_next_call() -> None:
    front = FrontStage(servers=1, service_s=0.010)
    front.add_work(0.0, 0.004)
    assert front.leave_s(0.001) == pytest.approx(0.014)
    front.add_work(1.0, 0.0)  # nothing to do: the server stays free
    assert front.leave_s(1.0) == pytest.approx(1.010)


# ---- the front door in the simulator ------------------------------------------------------------
def test_door_refuses_beyond_the_limit_at_once_and_releases_on_answer() -> None:
    door = LimiterSettings(initial_limit=2, min_limit=1, window=1000)
    burst = _run([0.0] * 5, SchedulerSimConfig(replicas=1, slo_ms=1000.0, front_door=door))
    outcomes = [r.outcome for r in burst.records]
    assert outcomes.count("ok") == 2 and outcomes.count("refused") == 3
    for r in burst.records:
        if r.outcome == "refused":
            assert (r.latency_ms, r.status_code, r.variant) == (0.0, 429, None)
    s = burst.summary
    assert (s.refused, s.answered, s.slo_attainment_admitted) == (3, 5, pytest.approx(1.0))
    # answered calls give their slot back: spaced calls at a limit of one are all admitted
    door1 = LimiterSettings(initial_limit=1, min_limit=1, window=1000)
    spaced = _run([0.0, 0.1, 0.2, 0.3], SchedulerSimConfig(replicas=1, slo_ms=1000.0,
                                                           front_door=door1))
    assert [r.outcome for r in spaced.records] == ["ok"] * 4


def test_refusals_cost_front_stage_time_for_the_admitted() -> None:
    door = LimiterSettings(initial_limit=1, min_limit=1, window=1000)

    def first_two(refusal_ms: float) -> list[float]:
        cfg = SchedulerSimConfig(replicas=1, slo_ms=1000.0, front_ms_per_call=5.0,
                                 front_ms_per_refusal=refusal_ms, front_door=door)
        run = _run([0.0, 0.001, 0.002, 0.003, 0.050], cfg)
        assert [r.outcome for r in run.records] == ["ok", "refused", "refused", "refused", "ok"]
        return [run.records[0].latency_ms, run.records[4].latency_ms]

    free, costly = first_two(0.0), first_two(20.0)
    assert free[0] == pytest.approx(15.0) and costly[0] == pytest.approx(15.0)  # 5 front + 10
    # three refusals queued 60 ms of work behind the first call's 5: the last call waits
    assert free[1] == pytest.approx(15.0)
    assert costly[1] == pytest.approx(5.0 + 60.0 + 5.0 + 10.0 - 50.0)


def test_learned_limit_keeps_admitted_in_time_when_the_stack_saturates() -> None:
    # the stack carries 100 calls/s (10 ms each); offered 3x that for 20 s
    arrivals = arrival_times(TraceSpec("poisson", 300.0, 20.0, seed=1))
    base = SchedulerSimConfig(replicas=1, slo_ms=200.0, front_ms_per_call=10.0)
    flood = _run(arrivals, base, duration_s=20.0).summary
    door = _run(arrivals, SchedulerSimConfig(replicas=1, slo_ms=200.0, front_ms_per_call=10.0,
                                             front_door=LimiterSettings()),
                duration_s=20.0).summary
    assert flood.refused == 0 and flood.slo_attainment_admitted < 0.2  # the queue eats the SLO
    assert door.refused > 0.5 * door.sent  # two of three cannot be carried
    assert door.slo_attainment_admitted > 0.9
    assert 80.0 < door.goodput_qps <= 101.0  # 100/s, and the last 0.2 s answered after 20 s
    # the same run twice: the limiter is part of a deterministic simulation
    again = _run(arrivals, SchedulerSimConfig(replicas=1, slo_ms=200.0, front_ms_per_call=10.0,
                                              front_door=LimiterSettings()),
                 duration_s=20.0).summary
    assert again == door


# ---- the resim's calibration ------------------------------------------------------------------
def _ok(i: int, t: float, latency_ms: float, **kw: float) -> RequestRecord:
    timing = {"compute_ms": 10.0, "queue_ms": 12.0, "dispatch_ms": 4.0, "server_ms": latency_ms}
    return RequestRecord(index=i, scheduled_s=t, sent_s=t, outcome="ok", latency_ms=latency_ms,
                         variant="big", batch_size=1, **{**timing, **kw})


def _live(name: str, qps: float, cpu_stack_ms: float, machine_ms: float,
          refused: int = 0) -> LiveRun:
    n = int(qps * 10)
    recs = [_ok(i, i / qps, 30.0) for i in range(n - refused)]
    recs += [RequestRecord(index=i, scheduled_s=0.0, sent_s=0.0, outcome="refused",
                           latency_ms=1.0, status_code=429) for i in range(n - refused, n)]
    return LiveRun(name, TraceSpec("poisson", qps, 10.0), recs, 10.0,
                   {"ProxyActor": cpu_stack_ms / 2, "Ingress": cpu_stack_ms / 2,
                    "machine": machine_ms})


def test_calibration_uses_the_ramp_steps_and_measures_the_neighbours() -> None:
    # stack: 0.4 cores + 8 ms per call; the 2x run's CPU (wildly off) must not be used
    ramp = [_live(f"app_ramp_{i}", q, (400 + 8 * q) / q, (400 + 8 * q) / q + 0.5)
            for i, q in enumerate((20.0, 40.0, 80.0))]
    runs = [*ramp, _live("app_2x", 160.0, 100.0, 120.0, refused=400)]
    cal = calibrate(runs, cores=2.0)
    assert cal.runs == ["app_ramp_0", "app_ramp_1", "app_ramp_2"]
    assert (cal.stack.fixed_cores, cal.stack.call_ms) == pytest.approx((0.4, 8.0))
    assert len(cal.served_records) == 200 + 400 + 800
    # stack time at the lightest step: 30 - 10 - (12 - 4) = 12 ms, less its front time
    assert stack_ms_p50(ramp[0].records) == pytest.approx(12.0)
    light_front = 8.0 / (2.0 - 0.4 - ramp[0].neighbour_cores())
    assert cal.hops_ms == pytest.approx(12.0 - light_front)
    assert ramp[0].neighbour_cores() == pytest.approx(0.5 * 200 / 10 / 1000)
    two = runs[3]
    assert (two.sent, two.admitted) == (1600, 1200)
    assert two.neighbour_cores() == pytest.approx(20.0 * 1600 / 10 / 1000)


def test_compare_and_read_runs(tmp_path: Path) -> None:
    live_recs = [_ok(i, 0.01 * i, 50.0) for i in range(90)] + [
        RequestRecord(index=90 + i, scheduled_s=0.0, sent_s=0.0, outcome="refused",
                      latency_ms=1.0, status_code=429) for i in range(10)]
    sim_recs = [_ok(i, 0.01 * i, 50.0 if i < 70 else 250.0) for i in range(80)] + [
        RequestRecord(index=80 + i, scheduled_s=0.0, sent_s=0.0, outcome="refused",
                      latency_ms=0.0, status_code=429) for i in range(20)]
    live = front_run("x", summarize(live_recs, 1.0, 200.0), live_recs)
    sim = front_run("x", summarize(sim_recs, 1.0, 200.0), sim_recs)
    d = compare(live, sim)
    assert d["attainment_admitted_pts"] == pytest.approx(100 * (70 / 80 - 1.0))
    assert d["refused_share_pts"] == pytest.approx(10.0)
    assert d["goodput_pct"] == pytest.approx(100 * (70 / 90 - 1))
    spec = {"kind": "poisson", "qps": 10.0, "duration_s": 1.0, "peak_qps": None, "seed": 4}
    (tmp_path / "app_ramp_0.json").write_text(json.dumps(
        {"config": {"trace": spec}, "wall_s": 1.5, "records": [r.to_dict() for r in live_recs]}))
    out = {"app": {"ramp": [{"name": "app_ramp_0"}], "runs": []},
           "cpu_ms_per_call": {"app_ramp_0": {"ProxyActor": 3.0, "machine": 4.0}}}
    (run,) = read_runs(out, tmp_path)
    assert run.spec == TraceSpec("poisson", 10.0, 1.0, seed=4)
    assert (run.sent, run.admitted, run.wall_s, run.stack_ms()) == (100, 90, 1.5, 3.0)


def test_the_simulated_door_knows_whether_the_policy_degrades() -> None:
    """As the ingress tells the live proxy: a policy that degrades, with variants to trade,
    is judged by `degrading_late_fraction`."""
    prof = _profile()
    cfg = SchedulerSimConfig(replicas=1, slo_ms=1000.0, front_door=LimiterSettings())

    def door_of(policy: str) -> bool:
        params = {"slo_s": 1.0, "max_qps": 50.0} if policy == "ramsis" else None
        run = simulate(prof, lambda k: make_scheduler(policy, prof, params=params),
                       np.asarray([0.0, 0.1]), 1.0, cfg)
        assert run.door is not None
        return run.door.degrades
    assert (door_of("ramsis"), door_of("most_accurate"), door_of("fastest")) == (True, False,
                                                                                 False)
