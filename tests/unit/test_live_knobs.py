"""The live bench's static configurations (which ones, the best one) and the knobs' metrics:
OTAS's utility and MOSEL's goodput at the accuracy SLO (pure parts; the live runs are a
script)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.sim.replica.request_metrics import RequestRecord
from bench.experiments.adaptive_vs_static.knob_metrics import (
    KnobMetrics,
    knob_metrics,
    parse_utilities,
    pool,
)
from bench.experiments.adaptive_vs_static.statics import (
    StaticConfig,
    best_static,
    resolve_statics,
    run_names,
    static_candidates,
)
from policies.profile import LatencyPoint, Profile, VariantProfile
from policies.types import Variant

REPO = Path(__file__).resolve().parents[2]


def _vp(name: str, acc: float, gamma: int = 0, modalities: tuple[str, ...] = ("image",),
        model: str = "m") -> VariantProfile:
    return VariantProfile(Variant(name, model, frozenset(modalities), gamma), acc,
                          (LatencyPoint(1, 1.0, 1.0, 1.0, 1.0),))


def _vit() -> Profile:
    return Profile("vit", "cpu", tuple(_vp(f"vit/g{g}", a, g) for g, a in
                                       ((-8, 0.80), (0, 0.82), (8, 0.84))))


def _fusion() -> Profile:
    return Profile("fusion", "cpu", (
        _vp("fusion/image", 0.68, modalities=("image",)),
        _vp("fusion/image+text", 0.74, modalities=("image", "text")),
        _vp("fusion/image+audio+text", 0.77, modalities=("image", "audio", "text"))))


def test_otas_statics_are_every_fixed_gamma_most_accurate_first() -> None:
    found = static_candidates(_vit(), "otas")
    assert [(s.label, s.policy, dict(s.params)) for s in found] == [
        ("g8", "fixed_gamma", {"gamma": 8}), ("g0", "fixed_gamma", {"gamma": 0}),
        ("g-8", "fixed_gamma", {"gamma": -8})]
    # one per gamma when each task has its own model of every gamma
    two_tasks = Profile("v", "cpu", (_vp("a/g0", 0.8, 0, model="a"), _vp("b/g0", 0.7, 0,
                                                                          model="b")))
    assert [s.label for s in static_candidates(two_tasks, "otas")] == ["g0"]


def test_mosel_statics_meet_the_accuracy_floor_and_include_all_modalities() -> None:
    found = static_candidates(_fusion(), "mosel", min_accuracy=0.74)
    assert [(s.label, s.policy) for s in found] == [
        ("image+audio+text", "fixed"), ("all_modalities", "all_modalities"),
        ("image+text", "fixed")]
    assert found[1].variant == "fusion/image+audio+text"
    assert [s.label for s in static_candidates(_fusion(), "mosel", 0.75)] == [
        "image+audio+text", "all_modalities"]
    # other policies: every variant, no all-modalities scheduler
    assert "all_modalities" not in {s.label for s in static_candidates(_fusion(), "ramsis")}


def test_resolve_statics_by_name_and_errors_name_the_valid_choices() -> None:
    (only,) = resolve_statics("most_accurate", _vit(), "otas")
    assert (only.label, only.policy, only.variant) == ("most_accurate", "most_accurate",
                                                       "vit/g8")
    assert [s.label for s in resolve_statics("all", _vit(), "otas")] == ["g8", "g0", "g-8"]
    assert [s.label for s in resolve_statics("g-8, g8,g-8", _vit(), "otas")] == ["g-8", "g8"]
    with pytest.raises(ValueError, match="g0"):
        resolve_statics("g4", _vit(), "otas")
    with pytest.raises(ValueError, match="accuracy floor"):
        resolve_statics("all", _fusion(), "mosel", min_accuracy=0.9)


def test_the_best_static_has_the_highest_live_capacity() -> None:
    assert best_static({"g8": 90.0, "g0": 120.5, "g-8": 120.0}) == "g0"
    assert best_static({"a": 50.0, "b": 50.0}) == "a"  # the first of equals
    with pytest.raises(ValueError):
        best_static({})
    g0 = StaticConfig("g0", "fixed_gamma", (("gamma", 0),))
    assert run_names(g0, "g0", several=True) == ("ramp_g0", "static_2x")
    assert run_names(g0, "g8", several=True) == ("ramp_g0", "static_g0_2x")
    assert run_names(g0, "g0", several=False) == ("ramp", "static_2x")
    assert StaticConfig.from_dict(json.loads(json.dumps(g0.to_dict()))) == g0


def _scenefusion() -> Profile:
    """The default app's modality-selection family: `_fusion`'s profile under its names."""
    return Profile("scenefusion", "cpu", tuple(
        _vp("scene" + v.variant.name, v.accuracy, modalities=tuple(sorted(v.variant.modalities)))
        for v in _fusion().variants))


def test_every_static_configuration_is_a_valid_app_config() -> None:
    from app.builder import load_config
    from bench.core import serve as lb
    from bench.experiments.adaptive_vs_static.settings import LiveBenchSettings, static_args

    args = lb.serve_args(REPO / "serve_config.yaml")
    for family, policy, profile in (("scenevit", "otas", _vit()),
                                    ("scenefusion", "mosel", _scenefusion())):
        settings = LiveBenchSettings(family=family, policy=policy)
        for st in static_candidates(profile, policy):
            c = load_config(static_args(settings, args, 2, 300.0, st)).classifier(family)
            assert (c.policy, c.num_replicas, c.default_slo_ms) == (st.policy, 2, 300.0)
            assert {k: getattr(c.policy_params, k) for k, _ in st.params} == dict(st.params)


def _rec(i: int, outcome: str = "ok", latency_ms: float = 50.0, label: int | None = 1,
         predicted: int | None = 1, acc: float | None = 0.8) -> RequestRecord:
    return RequestRecord(index=i, scheduled_s=0.0, sent_s=0.0, outcome=outcome,
                         latency_ms=latency_ms, label=label,
                         predicted=predicted if outcome == "ok" else None, expected_accuracy=acc)


def test_utility_counts_correct_answers_within_the_slo_at_their_call_utility() -> None:
    recs = [_rec(0), _rec(1), _rec(2, predicted=0), _rec(3, latency_ms=500.0),
            _rec(4, outcome="shed"), _rec(5, label=None, predicted=None, acc=0.75)]
    m = knob_metrics(recs, duration_s=2.0, slo_ms=100.0, utilities=(1.0, 0.5, 0.25))
    # calls 0..5 carry 1, .5, .25, 1, .5, .25; earned: 1 (0) + .5 (1) + 0 (2 wrong) + 0 (3
    # late) + 0 (4 shed) + .25 x .75 (5: no label, its expected accuracy)
    assert m.utility == pytest.approx(1.6875)
    assert m.utility_qps == pytest.approx(1.6875 / 2)
    assert m.offered_utility == pytest.approx(3.5)
    assert (m.satisfied, m.goodput_qps, m.attainment) == (4, 2.0, pytest.approx(4 / 6))
    # no utilities: each call is worth 1 -> correct answers in time
    assert knob_metrics(recs, 2.0, 100.0).utility == pytest.approx(2.75)


def test_goodput_at_the_accuracy_slo_judges_each_call_by_its_mean_expected_accuracy() -> None:
    # jobs of 2: call 0 (0.8, 0.7: mean 0.75 meets 0.75), call 1 (0.8, 0.6: 0.7 misses), call 2
    # (one ok at 0.8, one shed: the served part meets), call 3 late at 0.9
    recs = [_rec(0, acc=0.8), _rec(1, acc=0.7), _rec(2, acc=0.8), _rec(3, acc=0.6),
            _rec(4, acc=0.8), _rec(5, outcome="shed", acc=None),
            _rec(6, latency_ms=300.0, acc=0.9), _rec(7, latency_ms=300.0, acc=0.9)]
    m = knob_metrics(recs, 1.0, 100.0, job_size=2, min_accuracy=0.75)
    assert (m.satisfied, m.accuracy_satisfied) == (5, 3)
    assert m.accuracy_attainment == pytest.approx(3 / 8)
    # single requests: each item is its own call
    single = knob_metrics(recs, 1.0, 100.0, job_size=1, min_accuracy=0.75)
    assert single.accuracy_satisfied == 3  # items 0, 2, 4
    assert knob_metrics(recs, 1.0, 100.0, 2).accuracy_satisfied == 5  # no floor: goodput


def test_pool_sums_counts_and_durations() -> None:
    a = KnobMetrics(10.0, 100, 50, 40.0, 80.0, 30, 0.7)
    b = KnobMetrics(10.0, 100, 70, 60.0, 80.0, 50, 0.7)
    p = pool([a, b])
    assert (p.goodput_qps, p.utility_qps, p.accuracy_goodput_qps) == (6.0, 5.0, 4.0)
    assert p.to_dict()["attainment"] == pytest.approx(0.6)
    with pytest.raises(ValueError):
        pool([])


def test_utilities_parse_from_the_command_line() -> None:
    assert parse_utilities("table2") == (0.3, 0.01, 1.0, 0.2, 0.3, 0.01)
    assert parse_utilities("1, 0.5") == (1.0, 0.5)
    assert parse_utilities(None) == ()
    for bad in ("1,0", "x"):
        with pytest.raises(ValueError):
            parse_utilities(bad)


def test_calls_carry_their_utility_in_the_load_and_in_the_simulator() -> None:
    import numpy as np

    from app.sim.replica.sim import SchedulerSimConfig, simulate
    from app.sim.traces.spec import TraceSpec
    from bench.core.client import LoadgenConfig, build_payloads
    from policies.schedulers.base import PendingItem, Scheduler, SchedulerDecision
    from policies.schedulers.registry import make_scheduler

    cfg = LoadgenConfig(url="http://x", model="m", trace=TraceSpec("constant", 1.0, 1.0),
                        slo_ms=100.0, utilities=(0.3, 1.0))
    payloads = build_payloads([({"p": k}, k) for k in range(3)], cfg)  # 3 -> 4: a multiple
    assert [json.loads(p.body)["slo"]["utility"] for p in payloads] == [0.3, 1.0, 0.3, 1.0]
    with pytest.raises(ValueError, match="utilities"):
        LoadgenConfig(url="http://x", model="m", trace=cfg.trace, slo_ms=1.0, utilities=(0.0,))

    seen: dict[str, float] = {}
    prof = _vit()

    class Spy(Scheduler):  # the fixed scheduler, noting each item's utility
        def __init__(self) -> None:
            self.inner = make_scheduler("most_accurate", prof)
            self.name = "spy"

        def decide(self, pending: tuple[PendingItem, ...], now_s: float,
                   load_qps: float) -> SchedulerDecision:
            seen.update({p.item_id: p.utility for p in pending})
            return self.inner.decide(pending, now_s, load_qps)

    simulate(prof, lambda _k: Spy(), np.array([0.0, 0.1, 0.2]), 1.0,
             SchedulerSimConfig(replicas=1, slo_ms=100.0, job_size=2, utilities=(0.3, 1.0)))
    assert seen == {"0": 0.3, "1": 0.3, "2": 1.0, "3": 1.0, "4": 0.3, "5": 0.3}


def test_the_knobs_section_compares_the_adaptive_policy_with_every_static() -> None:
    from bench.experiments.adaptive_vs_static.knobs import (
        knobs_report,
        knobs_section,
        static_labels,
        utility_checks,
    )

    statics = {"best": "g0", "configs": [{"label": "g8"}, {"label": "g0"}]}
    live = {"static_2x": KnobMetrics(10.0, 100, 50, 40.0, 80.0, 50),
            "static_g8_2x": KnobMetrics(10.0, 100, 40, 20.0, 80.0, 40),
            "otas_2x": KnobMetrics(10.0, 100, 90, 60.0, 80.0, 90),
            "ramp_g0_0": KnobMetrics(10.0, 10, 10, 10.0, 10.0, 10)}
    sim = {"simcal_static_2x": KnobMetrics(10.0, 100, 50, 50.0, 80.0, 50),
           "simcal_otas_2x": KnobMetrics(10.0, 100, 100, 75.0, 80.0, 100)}
    section = knobs_section(live, sim, "otas", statics)
    assert section["runs"] == ["static_2x", "static_g8_2x", "otas_2x"]
    assert section["sources"] == ["live", "simcal"]
    assert section["ratios"]["live"] == pytest.approx(
        {"goodput": 1.8, "utility": 1.5, "accuracy_goodput": 1.8})
    assert section["ratios"]["simcal"]["utility"] == pytest.approx(1.5)
    assert section["utility_over_statics"]["live"] == pytest.approx(
        {"static_2x": 1.5, "static_g8_2x": 3.0})
    labels = static_labels(statics)
    assert labels == {"static_2x": "g0", "static_g8_2x": "g8"}
    text = knobs_report(section, labels)
    assert "g0 (best static)" in text and "g8 (static)" in text and "g8 x3.00" in text
    # OTAS's figure is judged against the best fixed configuration: the least of the ratios
    # (simcal ran only the best static here)
    judged = utility_checks(section)
    assert judged["utility_over_best_static"] == pytest.approx(1.5)
    assert judged["simcal_utility_over_best_static"] == pytest.approx(1.5)
    assert judged["pass"] == {"utility>=1.1x_best_static": True}
    live["otas_2x"] = KnobMetrics(10.0, 100, 90, 42.0, 80.0, 90)  # 1.05x g0's utility
    assert utility_checks(knobs_section(live, {}, "otas", statics))["pass"] == {
        "utility>=1.1x_best_static": False}
    assert utility_checks({"utility_over_statics": {}}) == {}


def test_the_simulator_phase_reads_the_best_static_and_the_others_from_the_run() -> None:
    from bench.experiments.adaptive_vs_static.settings import LiveBenchSettings
    from bench.experiments.fidelity.classify.live_runs import RecordedRun, phase_inputs

    settings = LiveBenchSettings(config=REPO / "serve_config.yaml", family="scenevit", policy="otas",
                                 job_size=4)
    ramp = {"g8": [{"offered_qps": 10, "goodput_qps": 10, "run": "ramp_g8_0"},
                   {"offered_qps": 15, "goodput_qps": 14, "run": "ramp_g8_1"},
                   {"offered_qps": 22, "goodput_qps": 12, "run": "ramp_g8_2"}],
            "g0": [{"offered_qps": 10, "goodput_qps": 10, "run": "ramp_g0_0"},
                   {"offered_qps": 15, "goodput_qps": 15, "run": "ramp_g0_1"}]}
    out = {"k": 1, "slo_ms": 300.0, "spec_1x": {"kind": "poisson", "qps": 2.0,
                                                  "duration_s": 5.0},
           "capacity": {"ramp": ramp["g0"], "live_qps": 15.0},
           "statics": {"best": "g0", "capacity": {k: {"ramp": v} for k, v in ramp.items()},
                       "configs": [StaticConfig("g8", "fixed_gamma", (("gamma", 8),)).to_dict(),
                                   StaticConfig("g0", "fixed_gamma", (("gamma", 0),)).to_dict()]}}
    runs = {n: RecordedRun([], {}) for n in ("static_2x", "static_g8_2x")}
    inputs = phase_inputs(settings, out, runs)
    assert (inputs.spec_2x.qps, inputs.k, inputs.slo_ms) == (2 * 15.0 / 4, 1, 300.0)
    vit = next(c for c in inputs.configs.static_args["classifiers"] if c["name"] == "scenevit")
    assert (vit["policy"], vit["policy_params"]) == ("fixed_gamma", {"gamma": 0})
    (other,) = inputs.others.values()
    assert list(inputs.others) == ["static_g8_2x"]
    assert next(c for c in other["classifiers"] if c["name"] == "scenevit")["policy_params"] == {
        "gamma": 8}
    assert inputs.served_runs == ("warmup_adaptive", "ramp_g8_1", "ramp_g8_2")
    # a run from before the static configurations: the most accurate, nothing else
    old = phase_inputs(settings, {k: v for k, v in out.items() if k != "statics"}, runs)
    vit = next(c for c in old.configs.static_args["classifiers"] if c["name"] == "scenevit")
    assert (vit["policy"], old.others, old.served_runs) == ("most_accurate", {},
                                                            ("warmup_adaptive",))
