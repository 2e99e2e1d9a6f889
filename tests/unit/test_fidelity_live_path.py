"""The simulator against the live system (bench/experiments/fidelity/generation/live_path.py, burst_replay.py): the
live benchmark's workload rebuilt as simulator requests, the live path's cost model on hand
cases (latency, hops, processor-shared CPU, the least-absolute fit), the replay's measured
startup and count comparison, and a burst replayed with the live policy.

Toy profiles (tests/helpers/generation_toys.py): an image encodes in 10 ms (linear in the batch); a
prefill of n tokens takes 5 + 0.1 (n - 1) ms; a decode step of b sequences 2 + 0.25 (b - 1) ms;
100 tokens per image.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from app.sim.generation.autoscale import Autoscaling, Capacities, PolicyTiming
from app.sim.generation.requests import GenRequest
from app.sim.generation.sim import LOST, simulate
from app.sim.traces.chat_spec import ChatTrafficSpec, ContextShape
from bench.experiments.fidelity.generation.burst_replay import (
    LiveMeteredSim,
    ServeAutoscaler,
    ServeTiming,
    compare_counts,
    measured_startup_s,
    replay,
)
from bench.experiments.fidelity.generation.live_path import (
    LiveGenerationSim,
    LiveRequest,
    PathCosts,
    PromptShape,
    fit_path_costs,
    image_hops,
    least_absolute,
    live_requests,
    processor_sharing,
    residuals,
    simulate_live,
    spread_draws,
)
from bench.workloads.chat import ExamplePool, make_workload
from policies.autoscaling import ENCODER, LLM, AppScalingSettings, ScalingSettings
from tests.helpers.generation_toys import disagg, mono, prefill, toy

# the live VLM's prompt (docs/data_generation.json model_shape; 16 encoder tokens an image)
SHAPE = PromptShape(base_tokens=12, turn_tokens=14, image_prompt_tokens=17, image_tokens=16)


# ---- the workload --------------------------------------------------------------------------
def bench_workload(rate: float, duration_s: float = 200.0) -> list:  # type: ignore[type-arg]
    pool = ExamplePool(tuple(f"w{i}" for i in range(360)),
                       tuple((f"q{i}", f"a{i}") for i in range(92)))
    spec = ChatTrafficSpec(rate, duration_s, seed=3)
    return make_workload(spec, ContextShape(256, 18, 12, 14), pool)


def test_rebuilt_workload_keeps_the_live_rate_image_share_and_image_counts() -> None:
    bench = bench_workload(16.0)
    sim = live_requests([LiveRequest(r.arrival_s, r.num_images, len(r.history))
                         for r in bench], SHAPE)
    arrivals = np.array([r.arrival_s for r in sim])
    assert len(sim) == len(bench)
    assert len(sim) / 200.0 == pytest.approx(16.0, rel=0.1)  # Poisson: 3200 +- 57
    assert (np.diff(arrivals) >= 0).all()
    images = np.array([r.num_images for r in sim])
    assert images.tolist() == [r.num_images for r in bench]
    assert (images > 0).mean() == pytest.approx(0.5, abs=0.05)
    counts = np.bincount(images[images > 0], minlength=9)[1:]
    probs = np.arange(1, 9, dtype=float) ** -1.5
    assert counts / counts.sum() == pytest.approx(probs / probs.sum(), abs=0.03)


def test_prompt_tokens_come_from_the_engine_count_else_the_template_shape() -> None:
    # live counts (usage.prompt_tokens of docs/data_generation.json's records):
    # text 12 + 14 per earlier turn, one image 29, two 45, eight 153
    assert SHAPE.prompt_tokens(0, 0) == 12 and SHAPE.prompt_tokens(0, 3) == 54
    assert SHAPE.prompt_tokens(1, 0) == 29 and SHAPE.prompt_tokens(1, 1) == 43
    for n, live in ((2, 45), (4, 81), (8, 153)):
        assert abs(SHAPE.prompt_tokens(n, 0) - live) <= 5
    rows = [LiveRequest(0.0, 2, 0, prompt_tokens=45, output_tokens=3),
            LiveRequest(1.0, 2, 0), LiveRequest(2.0, 0, 1, 26, None)]
    out = live_requests(rows, SHAPE, default_output_tokens=2)
    assert out == [GenRequest(0.0, 45 - 32, 2, 3), GenRequest(1.0, 46 - 32, 2, 2),
                   GenRequest(2.0, 26, 0, 2)]


# ---- the path's cost model ------------------------------------------------------------------
def test_path_latency_and_image_hops() -> None:
    costs = PathCosts(fixed_ms=20.0, per_hop_ms=10.0, per_image_ms=1.5)
    assert costs.latency_ms(0, 0) == 20.0
    assert costs.latency_ms(4, 2) == pytest.approx(20.0 + 20.0 + 6.0)
    assert [image_hops(n, mono()) for n in (0, 1, 8)] == [0, 1, 1]
    assert [image_hops(n, disagg(2)) for n in (0, 1, 2, 8)] == [0, 1, 2, 2]
    assert image_hops(8, disagg(3)) == 3
    with pytest.raises(ValueError):
        PathCosts(cpu_share=float("inf"))
    with pytest.raises(ValueError):
        PathCosts(fixed_ms=-1.0)


def test_processor_sharing_on_hand_cases() -> None:
    assert processor_sharing([0.0], [2.0], 1.0).tolist() == [2.0]
    # together on one core: each at half speed until the short one is done
    assert processor_sharing([0.0, 0.0], [1.0, 2.0], 1.0).tolist() == pytest.approx([2.0, 3.0])
    # B joins at 1 s when A has 1 s left: both at half speed, both done at 3 s
    assert processor_sharing([0.0, 1.0], [2.0, 1.0], 1.0).tolist() == pytest.approx([3.0, 3.0])
    # two cores for two jobs: no slowdown; a third waits its share
    assert processor_sharing([0.0, 0.0], [1.0, 2.0], 2.0).tolist() == pytest.approx([1.0, 2.0])
    three = processor_sharing([0.0, 0.0, 0.0], [3.0, 3.0, 3.0], 2.0)
    assert three.tolist() == pytest.approx([4.5, 4.5, 4.5])
    # no sharing (cores 0): each its own core; arrival order does not matter
    assert processor_sharing([1.0, 0.0], [1.0, 5.0], 0.0).tolist() == [2.0, 5.0]
    assert processor_sharing([1.0, 0.0], [1.0, 5.0], 1.0).tolist() == pytest.approx([3.0, 6.0])
    # one other busy thread on one core: a job alone gets half of it
    assert processor_sharing([0.0], [1.0], 1.0, competitors=1.0).tolist() == [2.0]
    assert processor_sharing([0.0, 0.0], [1.0, 1.0], 2.0, 1.0).tolist() == pytest.approx(
        [1.5, 1.5])


def test_a_path_alone_beside_competitors_takes_its_latency_and_stretches_with_company() -> None:
    costs = PathCosts(fixed_ms=20.0, cpu_share=0.5, host_cores=1.0, competitors=1.0)
    assert costs.alone_rate == pytest.approx(0.5)
    assert costs.path_s([0.0], [0.02]) == pytest.approx([0.02])  # 10 ms of CPU at half a core
    # two at once: 10 ms each at a third of the core, 30 ms of sojourn instead of 20: the
    # path's CPU part (20 ms alone, all of its latency here) stretches by 1.5
    assert costs.path_s([0.0, 0.0], [0.02, 0.02]) == pytest.approx([0.03, 0.03])
    assert PathCosts(cpu_share=0.5, host_cores=4.0, competitors=1.0).alone_rate == 1.0


def test_least_absolute_fit_ignores_outliers_and_never_goes_negative() -> None:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 9, 200)
    hops = np.minimum(images, 2)
    y = 18.0 + 12.0 * hops + 0.5 * images + rng.normal(0, 0.2, 200)
    y[:10] += 300.0  # a few requests caught in a hiccup
    costs = fit_path_costs(y + 5.0, np.full(200, 5.0), images.tolist(), hops.tolist())
    assert (costs.fixed_ms, costs.per_hop_ms, costs.per_image_ms) == pytest.approx(
        (18.0, 12.0, 0.5), abs=0.3)
    x = np.stack([np.ones(50), np.arange(50.0)], axis=1)
    assert least_absolute(x, 10.0 - 0.1 * np.arange(50.0)).tolist() == pytest.approx(
        [np.median(10.0 - 0.1 * np.arange(50.0)), 0.0], abs=0.05)  # slope < 0: dropped
    with pytest.raises(ValueError):
        fit_path_costs([1.0, float("inf")], [0.0, 0.0], [0, 0], [0, 0])
    left = residuals([30.0, 52.0, float("inf")], [5.0, 5.0, 5.0], [0, 2, 1], [0, 2, 1],
                     PathCosts(fixed_ms=20.0, per_hop_ms=10.0, per_image_ms=1.0))
    assert left.tolist() == pytest.approx([30.0 - 5.0 - 20.0, 52.0 - 5.0 - 42.0])
    draws = spread_draws([1.0, 2.0, 3.0], 50, seed=1)
    assert set(draws) <= {1.0, 2.0, 3.0} and draws == spread_draws([1.0, 2.0, 3.0], 50, seed=1)
    assert spread_draws([], 3) == [0.0, 0.0, 0.0]


def test_live_path_delays_each_request_before_the_stages() -> None:
    costs = PathCosts(fixed_ms=20.0, per_hop_ms=10.0)
    r = simulate_live([GenRequest(0.0, 100, 0, 1), GenRequest(1.0, 100, 1, 1)], toy(), mono(),
                      costs)
    # text: path + prefill; one image on the monolith: path + a hop + encode + prefill
    assert r.ttft_ms().tolist() == pytest.approx([20.0 + prefill(100),
                                                  30.0 + 10.0 + prefill(200)])
    plain = simulate([GenRequest(0.0, 100, 0, 1)], toy(), mono())
    assert plain.ttft_ms()[0] == pytest.approx(prefill(100))


def test_shared_cores_slow_concurrent_paths_and_the_deadline_counts_from_arrival() -> None:
    reqs = [GenRequest(0.0, 100, 0, 1), GenRequest(0.0, 100, 0, 1)]
    alone = PathCosts(fixed_ms=20.0, cpu_share=0.5, host_cores=0.0)
    shared = replace(alone, host_cores=1.0)
    assert simulate_live(reqs, toy(), mono(), alone).ttft_ms().tolist() == pytest.approx(
        [20.0 + prefill(200)] * 2)
    # 10 ms of CPU each on one core: both done at 20 ms, then the 10 ms of waiting
    assert simulate_live(reqs, toy(), mono(), shared).ttft_ms().tolist() == pytest.approx(
        [30.0 + prefill(200)] * 2)
    # more CPU than latency (work off the critical path): 40 ms each on one core, both done
    # at 80 ms; a path takes its sojourn / 2 (alone: 20 ms, its latency)
    busy = PathCosts(fixed_ms=20.0, cpu_share=2.0, host_cores=1.0)
    assert busy.path_s([0.0], [0.02]) == pytest.approx([0.02])
    assert busy.path_s([0.0, 0.0], [0.02, 0.02]) == pytest.approx([0.04, 0.04])
    assert PathCosts(cpu_share=0.0, host_cores=1.0).path_s([0.0], [0.02]) == [0.02]
    sim = LiveGenerationSim(reqs, toy(), mono(ttft_slo_ms=25.0, drop_lost=True), shared)
    assert sim.path_s == pytest.approx([0.03, 0.03])
    assert (sim.run().outcome == LOST).all()  # 30 ms of path: the 25 ms deadline is gone


# ---- the burst replay ---------------------------------------------------------------------
def _row(t: float, enc: tuple[int, int | None], llm: tuple[int, int | None] = (1, 1)) -> dict:
    return {"t_s": t, "encoder": {"running": enc[0], "target": enc[1]},
            "llm": {"running": llm[0], "target": llm[1]}}


def test_measured_startup_is_the_median_wait_from_target_to_running() -> None:
    rows = [_row(0, (1, 1)), _row(1, (1, 2)), _row(5, (1, 2)), _row(9, (2, 2)),
            _row(10, (2, 4)), _row(30, (4, 4)), _row(40, (4, 5)), _row(41, (4, 5))]
    assert measured_startup_s(rows, "encoder") == pytest.approx((8.0 + 20.0) / 2)
    assert measured_startup_s(rows, "llm") is None


def test_compare_counts_on_hand_series() -> None:
    live = [_row(0, (1, 1)), _row(1, (1, 3)), _row(2, (3, 3)), _row(3, (1, 1))]
    sim = [_row(0, (1, 1)), _row(1, (1, 1)), _row(2, (2, 2)), _row(3, (2, 1))]
    c = compare_counts(live, sim)["encoder"]
    assert (c["live_peak_running"], c["sim_peak_running"]) == (3, 2)
    assert (c["live_first_up_s"], c["sim_first_up_s"]) == (1, 2)
    assert (c["live_last_above_start_s"], c["sim_last_above_start_s"]) == (2, 3)
    assert c["same_running_share"] == 0.5 and c["mean_abs_running_diff"] == 0.5


def test_an_image_burst_scales_the_encoders_up_and_back_while_the_llm_stays() -> None:
    text = [GenRequest(0.5 * k, 20, 0, 2) for k in range(120)]  # 2 req/s for 60 s
    burst = [GenRequest(10.0 + 0.2 * k, 20, 4, 2) for k in range(100)]  # 5 req/s, 10-30 s
    reqs = sorted(text + burst, key=lambda r: r.arrival_s)
    settings = AppScalingSettings(ScalingSettings(1000.0, 1, 4, 0.8, 5.0, 2.0),
                                  ScalingSettings(1e6, 1, 2, 0.8, 5.0, 2.0))
    timing = ServeTiming(0.1, 0.5, 2.0, 2.0)
    scaler = ServeAutoscaler(settings, Capacities(1000.0, 1e6, 100),
                             Autoscaling(PolicyTiming(), max_accelerators=100),
                             {ENCODER: 1, LLM: 1}, False, timing=timing)
    cfg = disagg(1, ttft_slo_ms=2000.0)
    cfg = replace(cfg, encoder=replace(cfg.encoder, startup_s=2.0))
    sim = LiveMeteredSim(reqs, toy(), cfg, PathCosts(fixed_ms=20.0), window_s=2.0)
    times = [float(t) for t in range(60)]
    out = replay(sim, scaler, times, offset_s=0.0)
    enc = [r["encoder"]["running"] for r in out.rows]
    # 5 req/s x 4 images x 100 tokens = 2000 image tokens/s: ceil(2000 / 800) = 3 encoders
    assert max(enc[10:30]) >= 3 and enc[5] == 1 and enc[-1] == 1
    assert {r["llm"]["running"] for r in out.rows} == {1}
    assert all(p == 1 for _, p in [(t, x["llm"]["target"]) for t, x in
                                   zip(times, out.rows, strict=True)][1:])
