import csv
import json

import numpy as np
import pytest

from app.sim.ramsis.data import IMAGE_MODELS, load_ramsis_profile
from app.sim.traces.workloads import azure_llm_trace, constant_poisson, twitter_rates_per_second
from policies.profile import LatencyModel, LatencyPoint, Profile, VariantProfile, dense_latency_ms
from policies.types import Variant
from profiling.paths import shared_data_dir
from tests.conftest import needs_shared


def _pt(b, ms):
    return LatencyPoint(b, ms, ms, ms, ms)


def test_linear_fill_and_suffix_minimum():
    pts = (_pt(1, 10.0), _pt(2, 30.0), _pt(3, 25.0), _pt(5, 40.0))
    table = dense_latency_ms(pts, "p95", 5)
    assert all(a <= b for a, b in zip(table, table[1:], strict=False))
    assert table[0] == 10.0 and table[4] == 40.0  # measured values kept
    assert table[1] == 25.0  # 30 lowered to the later 25 (suffix minimum)
    assert table[3] == pytest.approx(240 / 7)  # b=4: least-squares line through the points


def test_profile_json_roundtrip():
    p = Profile("x", "cpu", (VariantProfile(Variant("v", "m", frozenset({"audio"}), -5), 0.8,
                                            (_pt(1, 3.0), _pt(2, 5.0))),))
    assert Profile.from_dict(json.loads(json.dumps(p.to_dict()))) == p
    with pytest.raises(ValueError, match="unknown variant"):
        p.by_name("nope")


@needs_shared
def test_ramsis_profile_p95_matches_derived_summary():
    profile = load_ramsis_profile("image", data_dir=shared_data_dir())
    assert profile.names() == list(IMAGE_MODELS)
    with open(shared_data_dir() / "ramsis" / "derived" / "profile_latency_summary.csv") as fh:
        rows = {(r["model"], int(r["batch_size"])): float(r["p95_ms"]) for r in csv.DictReader(fh)}
    for vp in profile.variants:
        for p in vp.latency:
            assert p.p95_ms == pytest.approx(rows[(vp.variant.name, p.batch_size)], abs=1e-3)
    lm = LatencyModel.from_profile(profile, "p95", 32)
    assert all(len(t) == 32 for t in lm.latency_s)
    assert lm.accuracy[0] == pytest.approx(0.57972)


@needs_shared
def test_twitter_expansion_and_azure():
    rates = twitter_rates_per_second(shared_data_dir(), 300)
    assert rates.size == 300 and rates[0] == 1850 and rates[10] == 1617
    assert rates[261] == rates[0]  # wraps after 261 one-second entries
    a = azure_llm_trace(shared_data_dir(), "code", limit=100)
    assert a.num_requests == 100 and np.all(np.diff(a.arrivals_s) >= 0)
    assert "context_tokens" in a.columns


def test_poisson_rate_and_seed():
    a, b = constant_poisson(1000, 10, seed=5), constant_poisson(1000, 10, seed=5)
    np.testing.assert_array_equal(a.arrivals_s, b.arrivals_s)
    assert 9500 < a.num_requests < 10500
