import numpy as np
import pytest

from app.sim.kernel import Kernel
from app.sim.ramsis.engine import Balancer, SimConfig, Simulator
from app.sim.ramsis.metrics import summarize
from app.sim.traces.workloads import constant_poisson
from policies.model_selection.api import Choice, WorkerView
from policies.model_selection.baselines import FixedPolicy
from policies.profile import LatencyModel
from policies.queue import RateWindow


def model() -> LatencyModel:
    return LatencyModel(("a", "b"), (0.7, 0.9), ((0.01, 0.015, 0.02), (0.05, 0.08, 0.1)), 3)


def test_event_order_time_then_priority_then_seq():
    kernel = Kernel()
    seen: list[tuple[float, int]] = []

    def handler(now: float, payload: int) -> None:
        seen.append((now, payload))
        if payload == 3:  # handlers schedule what follows, here at the same instant
            kernel.at(now + 0.5, 0, handler, 5)

    kernel.at(1.0, 1, handler, 1)
    kernel.at(1.0, 0, handler, 2)
    kernel.at(0.5, 1, handler, 3)
    kernel.at(1.0, 0, handler, 4)
    kernel.run()
    assert seen == [(0.5, 3), (1.0, 2), (1.0, 4), (1.0, 5), (1.0, 1)]
    assert len(kernel) == 0


def test_kernel_feeds_arrivals_one_at_a_time():
    kernel = Kernel()
    seen: list[int] = []
    kernel.feed([0.0, 0.2, 0.2, 0.9], 1, lambda now, i: seen.append(i))
    assert len(kernel) == 1
    kernel.run()
    assert seen == [0, 1, 2, 3]


def test_rate_window_edges():
    full = RateWindow(0.5, full_span=True)  # RAMSIS's monitor: always over the whole window
    for t in (0.0, 0.1, 0.2, 0.6):
        full.add(t)
    assert full.rate(0.65) == 2 / 0.5  # 0.2 and 0.6 remain in the last 500 ms
    edge = RateWindow(0.5, full_span=True)
    for t in (0.0, 0.25, 0.5):
        edge.add(t)
    assert edge.rate(0.75) == 1 / 0.5  # (0.25, 0.75]: an arrival exactly 500 ms old has left
    fresh = RateWindow(2.0)  # the replica's: over the time since the first arrival
    fresh.add(1.0, 3)
    assert fresh.rate(1.5) == 3 / 0.5 and fresh.rate(1.1) == 3 / 0.25


class Recorder:
    name = "recorder"

    def __init__(self):
        self.views: list[WorkerView] = []

    def choose(self, view: WorkerView) -> Choice:
        self.views.append(view)
        return Choice(0, view.queue_length)


def test_round_robin_assigns_in_turn_and_serves_whole_queue():
    arrivals = np.array([0.0, 0.001, 0.002, 0.003, 0.004, 0.005])
    rec = Recorder()
    out = Simulator(SimConfig(2, 0.1, Balancer.ROUND_ROBIN), model(), rec).run(arrivals)
    assert [v.worker_id for v in rec.views[:2]] == [0, 1]
    assert np.all(out.finish_s >= arrivals)
    assert out.batch_size.sum() == arrivals.size
    # worker 0 got queries 0, 2, 4: query 0 alone, then 2 and 4 together after 10 ms
    assert rec.views[2].worker_id == 0 and rec.views[2].queue_length == 2


def test_simulation_is_deterministic_and_loses_nothing():
    w = constant_poisson(300.0, 5.0, seed=3)
    runs = [Simulator(SimConfig(4, 0.1, b), model(), FixedPolicy("f", 1, 3)).run(w.arrivals_s)
            for b in (Balancer.CENTRAL, Balancer.CENTRAL)]
    np.testing.assert_array_equal(runs[0].finish_s, runs[1].finish_s)
    assert not np.isnan(runs[0].finish_s).any()
    s = summarize("f", runs[0], model(), 0.1, 5.0)
    assert s.num_queries == w.num_requests
    late = (runs[0].finish_s - w.arrivals_s) > 0.1 + 1e-9
    assert s.violation_rate == pytest.approx(late.mean())
    assert s.violation_rate > 0.99  # 4 workers serve at most 4 x 3 / 0.1 s = 120 of 300 queries/s
    assert s.goodput_qps == pytest.approx((~late).sum() / 5.0)
    assert s.accuracy_per_satisfied == pytest.approx(0.9)  # every batch on "b"


def test_shortest_queue_balancer_spreads_load():
    w = constant_poisson(200.0, 2.0, seed=1)
    rec = Recorder()
    Simulator(SimConfig(3, 0.1, Balancer.SHORTEST_QUEUE), model(), rec).run(w.arrivals_s)
    assert {v.worker_id for v in rec.views} == {0, 1, 2}
