"""Agreement with the paper's public implementation (image, 9 models, SLO 150 ms, 60 workers,
constant 2000 QPS): expected 0.7487, simulated 0.7491; Jellyfish+ and ModelSwitching 0.7300."""

import pytest

from app.sim.ramsis.data import load_ramsis_profile
from app.sim.ramsis.experiments import Scenario, run_scenario
from policies.model_selection.api import WorkerView
from policies.model_selection.baselines import jellyfish_choice
from policies.model_selection.table import RamsisSelector
from policies.profile import LatencyModel
from profiling.paths import shared_data_dir
from tests.conftest import needs_shared


@needs_shared
def test_agreement_with_reference_at_2000_qps(tmp_path):
    model = LatencyModel.from_profile(load_ramsis_profile("image", data_dir=shared_data_dir()),
                                      "p95", 32)
    assert jellyfish_choice(model, 0.15, 60, 2000).variant_index == 1  # mobilenet_v3_large, b<=3
    s = Scenario(0.15, 60, "constant", qps=2000, duration_s=30, cache_dir=tmp_path)
    res = run_scenario(s, model)["results"]
    assert res["ramsis"]["expected_accuracy"] == pytest.approx(0.7487, abs=0.005)
    assert res["ramsis"]["accuracy_per_satisfied"] == pytest.approx(0.7491, abs=0.005)
    assert res["ramsis"]["violation_rate"] < 0.005
    for base in ("jellyfish", "modelswitching"):
        assert res[base]["accuracy_per_satisfied"] == pytest.approx(0.7300, abs=0.005)
        assert res[base]["violation_rate"] == 0.0


def test_selector_uses_lowest_covering_load():
    from policies.model_selection.table import PolicyTable

    def table(load, m):
        return PolicyTable(load, 0.1, 1, (0.0, 0.1), ((m, m),), ((1, 1),), 0, 0.5, 0.0, ("a", "b"))

    sel = RamsisSelector([table(200, 0), table(100, 1)])
    view = lambda q: WorkerView(0, 1, 0.1, q, 0.0)  # noqa: E731
    assert sel.choose(view(50)).variant_index == 1
    assert sel.choose(view(100)).variant_index == 1
    assert sel.choose(view(150)).variant_index == 0
    assert sel.choose(view(999)).variant_index == 0
    assert sel.choose(WorkerView(0, 5, 0.1, 50, 0.0)).batch_size == 5  # beyond N: whole queue
