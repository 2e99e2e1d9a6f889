"""bench_live's "simfront" source (bench/experiments/fidelity/classify/front_door.py): what it reads of a finished run (CPU
per call, calls of a job, the door's settings, the cores), its calibration on the static
configurations' ramp steps only, the model's CPU taken out of the stack's line and given back as
the front stage's neighbour, and the checks that report it beside sim and simcal. No Ray, no
model: toy profiles and records."""

from __future__ import annotations

import numpy as np
import pytest

from app.sim.replica.request_metrics import RequestRecord, summarize
from app.sim.replica.sim import SchedulerSimConfig, simulate
from app.sim.traces.spec import TraceSpec, arrival_times
from bench.experiments.adaptive_vs_static.report import checks, sim_kinds
from bench.experiments.fidelity.classify.front_door import (
    FrontModel,
    FrontRuns,
    FrontSim,
    ModelCpu,
    RunCpu,
    calibration_runs,
    door_settings,
    front_model,
    machine_cores,
    outside_replica_p50_ms,
    simulate_front,
    usable_cores,
)
from bench.experiments.fidelity.classify.single_request import stack_ms_p50
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


def _rec(i: int, outcome: str = "ok", job: str | None = None, **kw: float | str) -> RequestRecord:
    return RequestRecord(index=i, scheduled_s=0.0, sent_s=0.0, outcome=outcome, job_id=job,
                         **kw)  # type: ignore[arg-type]


# ---- what a live run tells the model ----------------------------------------------------------
def test_run_cpu_counts_calls_of_a_job_and_takes_the_model_out() -> None:
    # 3 jobs of 4 items in 2 s, one refused whole; 100 ms of stack CPU per call, 130 machine
    recs = [_rec(i, "ok", f"j{i // 4}", variant="big", batch_size=4) for i in range(8)]
    recs += [_rec(8 + i, "refused", "j2") for i in range(4)]
    cpu = {"ProxyActor": 40.0, "Ingress": 60.0, "machine": 130.0}
    run = RunCpu.of(recs, 4, 2.0, cpu, ModelCpu(_profile()))
    assert (run.calls, run.refused_calls) == (3.0, 1.0)
    # the model: two batches of 4 on "big" at the profile's 16 ms -> 32 ms in 2 s
    assert run.model_cores == pytest.approx(0.016)
    s = run.sample()
    assert (s.admitted_qps, s.refused_qps) == (1.0, 0.5)
    assert s.busy_cores == pytest.approx(100.0 * 3 / 2.0 / 1000 - 0.016)
    assert run.neighbour_cores() == pytest.approx(30.0 * 3 / 2.0 / 1000)
    with pytest.raises(ValueError, match="wall time"):
        RunCpu.of(recs, 4, 0.0, cpu).sample()


def test_outside_replica_time_per_call() -> None:
    singles = [_rec(0, latency_ms=40.0, queue_ms=20.0, dispatch_ms=5.0, compute_ms=10.0),
               _rec(1, latency_ms=50.0, queue_ms=12.0, dispatch_ms=10.0, compute_ms=8.0),
               _rec(2, "shed", latency_ms=5.0)]
    # front_sim's stack time for single requests: latency - compute - (queue - dispatch)
    assert outside_replica_p50_ms(singles) == pytest.approx(stack_ms_p50(singles))
    assert outside_replica_p50_ms(singles) == pytest.approx(np.median([15.0, 40.0]))
    # a job: from its first dispatch (5 ms) to its last batch's end (30 + 10 = 40 ms)
    job = [_rec(0, job="j", latency_ms=60.0, queue_ms=15.0, dispatch_ms=5.0, compute_ms=10.0),
           _rec(1, job="j", latency_ms=60.0, queue_ms=30.0, dispatch_ms=6.0, compute_ms=10.0)]
    assert outside_replica_p50_ms(job) == pytest.approx(60.0 - (40.0 - 5.0))
    # older records without dispatch_ms count from the batch's start
    old = [_rec(0, latency_ms=40.0, queue_ms=20.0, compute_ms=10.0)]
    assert outside_replica_p50_ms(old) == pytest.approx(30.0)
    with pytest.raises(ValueError, match="no ok answers"):
        outside_replica_p50_ms([_rec(0, "refused")])


def test_door_cores_and_calibration_runs_from_the_json() -> None:
    recorded = {"initial_limit": 8, "window": 20}
    assert door_settings({"front_door": recorded}, 1) == LimiterSettings(initial_limit=8,
                                                                         window=20)
    assert door_settings({}, 1) == LimiterSettings()  # before bench_live recorded them
    assert door_settings({"front_door": recorded}, 32) is None  # /v1/jobs is not limited
    assert machine_cores({"machine_cores": 4, "cpu_count": 2}) == 4.0
    assert machine_cores({"cpu_count": 2}) == 2.0
    ramp = {"g8": [{"run": "ramp_g8_0"}, {"run": "ramp_g8_1"}], "g0": [{"run": "ramp_g0_0"}]}
    out = {"statics": {"capacity": {k: {"ramp": v} for k, v in ramp.items()}},
           "capacity": {"ramp": ramp["g8"]}}
    assert calibration_runs(out) == ["ramp_g8_0", "ramp_g8_1", "ramp_g0_0"]
    assert calibration_runs({"capacity": {"ramp": [{}, {}]}}) == ["ramp_0", "ramp_1"]


# ---- calibration ------------------------------------------------------------------------------
def _cpu_run(qps: float, stack_ms: float, machine_ms: float, model_cores: float = 0.0,
             wall_s: float = 10.0) -> RunCpu:
    return RunCpu(qps * wall_s, 0.0, wall_s, {"Ingress": stack_ms, "machine": machine_ms},
                  model_cores)


def test_front_model_fits_the_ramps_only_without_the_model() -> None:
    # the stack less the model: 0.3 cores + 6 ms per call; the model takes 2 ms per call more
    ramp = {f"ramp_{i}": _cpu_run(q, (300 + 8 * q) / q, (300 + 8 * q) / q + 1.0, 0.002 * q)
            for i, q in enumerate((20.0, 40.0, 80.0))}
    cpu = {**ramp, "static_2x": _cpu_run(200.0, 50.0, 50.5, 0.4)}  # wildly off: not fitted
    light = [_rec(i, latency_ms=30.0, queue_ms=12.0, dispatch_ms=4.0, compute_ms=10.0)
             for i in range(5)]
    out = {"capacity": {"ramp": [{}, {}, {}]}, "machine_cores": 2}
    runs = FrontRuns(cpu, {"ramp_0": light}, "ramp_0", ["ramp_1", "ramp_2"], ["static_2x"])
    front = front_model(out, runs, 1, light)
    st = front.calibration.stack
    usable = 2.0  # nothing refused in the ramp: the machine's ceiling was never seen
    assert (st.fixed_cores, st.call_ms, st.cores) == pytest.approx((0.3, 6.0, usable))
    assert front.calibration.runs == ["ramp_0", "ramp_1", "ramp_2"]
    assert front.door == LimiterSettings()
    assert front.neighbour_cores == {"static_2x": pytest.approx(0.5 * 200 / 1000)}
    assert front.model_cores_guess == pytest.approx((0.08 + 0.16) / 2)
    # hops: 30 - 10 - (12 - 4) = 12 ms at the light step, less its front-stage time there
    left = usable - 0.3 - ramp["ramp_0"].neighbour_cores() - 0.04
    assert front.calibration.hops_ms == pytest.approx(12.0 - 6.0 / left)
    cfg = front.config(SchedulerSimConfig(replicas=1, slo_ms=200.0), "static_2x", 0.5)
    assert cfg.front_ms_per_call == pytest.approx(6.0 / (usable - 0.3 - 0.1 - 0.5))
    assert (cfg.front_door, cfg.overhead_ms) == (LimiterSettings(), front.calibration.hops_ms)


def test_the_line_is_fitted_where_the_machine_had_room_the_ceiling_where_it_had_none() -> None:
    # 0.3 cores + 6 ms per call below the knee; at the knee the machine is full (1.9 cores)
    # and the door refuses: its busy cores must not bend the line (nor pass as refusal cost)
    ramp = {f"ramp_{i}": _cpu_run(q, (300 + 6 * q) / q, (300 + 6 * q) / q + 1.0)
            for i, q in enumerate((20.0, 40.0, 80.0))}
    ramp["ramp_3"] = RunCpu(2000.0, 600.0, 10.0, {"Ingress": 8.0, "machine": 9.5}, 0.0)
    # a step below the knee with a few refusals (2 %): too few to price a refusal on
    ramp["ramp_2"] = RunCpu(816.0, 16.0, 10.0, {"Ingress": (300 + 6 * 80.0) / 81.6,
                                                "machine": 10.0}, 0.0)
    light = [_rec(i, latency_ms=30.0, queue_ms=12.0, dispatch_ms=4.0, compute_ms=10.0)
             for i in range(5)]
    out = {"capacity": {"ramp": [{}, {}, {}, {}]}, "machine_cores": 2}
    runs = FrontRuns(ramp, {"ramp_0": light}, "ramp_0", ["ramp_3"], [])
    st = front_model(out, runs, 1, light).calibration.stack
    assert (st.fixed_cores, st.call_ms, st.refusal_ms) == pytest.approx((0.3, 6.0, 0.0))
    assert st.cores == pytest.approx(1.9)  # the saturated step's machine: 9.5 ms x 200/s


def test_usable_cores_are_the_busiest_calibration_run_at_most_the_machine() -> None:
    out = {"machine_cores": 2}
    full = RunCpu(2200.0, 200.0, 10.0, {"Ingress": 8.0, "machine": 8.3}, 0.0)  # 9 % refused
    runs = [_cpu_run(100.0, 8.0, 9.0), full]  # 0.9 and 1.826 cores busy
    assert usable_cores(out, runs) == pytest.approx(1.826)
    assert usable_cores(out, [_cpu_run(300.0, 8.0, 9.0)]) == 2.0  # never above the machine
    # no machine figure (older runs): the nominal cores
    bare = RunCpu(100.0, 0.0, 10.0, {"Ingress": 8.0}, 0.0)
    assert usable_cores(out, [bare]) == 2.0 and usable_cores(out, []) == 2.0
    # a ramp that never reached its knee (nothing refused) never showed the machine's ceiling
    assert usable_cores(out, [_cpu_run(100.0, 8.0, 9.0), _cpu_run(200.0, 8.0, 9.1)]) == 2.0


# ---- the simulation ---------------------------------------------------------------------------
def _front(call_ms: float, fixed: float, door: LimiterSettings | None) -> FrontModel:
    from app.sim.replica.front_door import StackCpu
    from bench.experiments.fidelity.classify.single_request import FrontCalibration

    return FrontModel(FrontCalibration(StackCpu(2.0, fixed, call_ms, 0.0), 1.0, [], []), door,
                      {"run": 0.0}, model_cores_guess=0.0)


def _front_sim(qps: float, duration_s: float = 10.0) -> FrontSim:
    prof = _profile()
    return FrontSim("run", prof, lambda _k: make_scheduler("most_accurate", prof),
                    arrival_times(TraceSpec("poisson", qps, duration_s, seed=3)), duration_s,
                    SchedulerSimConfig(replicas=1, slo_ms=200.0, max_batch_size=8),
                    lambda: None)  # type: ignore[arg-type,return-value]


def test_simulate_front_second_pass_assumes_the_first_pass_model_cores() -> None:
    model, s = ModelCpu(_profile()), _front_sim(100.0)
    front = _front(4.0, 0.2, LimiterSettings())
    first = simulate(s.profile, s.make_scheduler, s.arrivals_s, s.duration_s,
                     front.config(s.config, "run", 0.0))
    sim, used = simulate_front(front, model, s)
    assert used == pytest.approx(model.cores(first.records, s.duration_s))
    assert used > 0.1  # "big" at 100 items/s: batches of a few items at 10-16 ms
    second = simulate(s.profile, s.make_scheduler, s.arrivals_s, s.duration_s,
                      front.config(s.config, "run", used))
    assert sim.summary == second.summary


def test_the_model_s_cores_slow_the_front_and_the_door_refuses() -> None:
    model = ModelCpu(_profile())
    # 9 ms per call: the front carries ~200 calls/s on 1.8 free cores, ~110/s beside a model
    # of ~0.8 cores; offered 250/s with the door: it refuses, and more beside the model
    plain = _front(9.0, 0.2, LimiterSettings())
    sim, used = simulate_front(plain, model, _front_sim(250.0))
    free = FrontModel(plain.calibration, plain.door, {"run": 0.0}, 0.0)
    cfg = free.config(_front_sim(250.0).config, "run", 0.0)
    assert cfg.front_ms_per_call == pytest.approx(9.0 / 1.8)
    assert free.config(cfg, "run", used).front_ms_per_call > cfg.front_ms_per_call
    assert sim.summary.refused > 0
    assert sim.summary.slo_attainment_admitted > 0.9  # the door keeps the admitted in time
    # without the door nothing is refused and the queue eats the SLO
    flood, _ = simulate_front(_front(9.0, 0.2, None), model, _front_sim(250.0))
    assert flood.summary.refused == 0
    assert flood.summary.slo_attainment < sim.summary.slo_attainment


def test_a_run_starts_from_the_limiter_the_run_before_it_left() -> None:
    # live, the proxy's limiter outlives runs: a run after an overload starts with the small
    # limit the overload taught it, and refuses more at first than a fresh proxy would
    model = ModelCpu(_profile())
    front = _front(9.0, 0.2, LimiterSettings())
    over, _ = simulate_front(front, model, _front_sim(400.0))
    assert over.door is not None and over.door.inflight == 0
    learned = over.door.limit
    assert learned < LimiterSettings().initial_limit
    fresh, _ = simulate_front(front, model, _front_sim(150.0, 2.0))
    after, _ = simulate_front(front, model, _front_sim(150.0, 2.0), over.door)
    assert after.summary.refused > fresh.summary.refused
    assert over.door.limit == learned  # each pass starts from a copy: the caller's is kept


# ---- the checks -------------------------------------------------------------------------------
def _summary(ok: int, refused: int, accuracy: float):  # type: ignore[no-untyped-def]
    recs = [_rec(i, latency_ms=50.0, expected_accuracy=accuracy, variant="big", batch_size=1)
            for i in range(ok)]
    recs += [_rec(ok + i, "refused", latency_ms=1.0) for i in range(refused)]
    return summarize(recs, 1.0, 200.0)


def test_checks_report_simfront_beside_the_others_and_skip_it_where_absent() -> None:
    live = {"static_2x": _summary(50, 50, 0.8), "otas_1x": _summary(90, 10, 0.8),
            "otas_2x": _summary(50, 50, 0.8)}
    sims = {f"{k}_{n}": _summary(100, 0, 0.8) for k in ("sim", "simcal") for n in live}
    sims.update({f"simfront_{n}": s for n, s in live.items()})
    sims["simfront_otas_1x"] = _summary(89, 11, 0.79)
    out = {"runs": live, "sim": sims, "overhead": {"ratio": 1.0}, "memory": {"total_mib": 1.0}}
    res = checks(out, "otas")
    assert sim_kinds(sims) == ["sim", "simcal", "simfront"]
    assert res["simfront_otas_1x_violation_diff_pts"] == pytest.approx(10.0 - 11.0)
    assert res["simfront_otas_1x_accuracy_diff_pts"] == pytest.approx(1.0)
    assert res["pass"]["simfront_adaptive_within_2pts"] is True
    assert res["pass"]["sim_adaptive_within_2pts"] is False  # 50 points off at 2x
    assert res["static_overloaded_within_2pts"]["simfront"] is True
    sims["simfront_otas_2x"] = _summary(40, 60, 0.8)
    assert checks(out, "otas")["pass"]["simfront_adaptive_within_2pts"] is False
    # a JSON from before simfront: its checks as they were
    old = {**out, "sim": {k: v for k, v in sims.items() if not k.startswith("simfront")}}
    res_old = checks(old, "otas")
    assert "simfront_adaptive_within_2pts" not in res_old["pass"]
    assert not any(k.startswith("simfront") for k in res_old)
