"""Plan files from profile files: kinds per profile, caching, rebuild, loadable by schedulers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policies.profile import LatencyModel, LatencyPoint, Profile, VariantProfile
from policies.schedulers.plan_types import (
    LoadGranularPlan,
    MoselPlan,
    OtasPlan,
    PlanKind,
    RamsisPolicySet,
    plan_from_json,
)
from policies.schedulers.plans import mosel_matrix, plan_model
from policies.schedulers.registry import make_scheduler
from policies.types import Variant
from profiling.paths import plan_file
from profiling.plans import PlanSettings, ensure_plans, load_range, plan_kinds

SIZES = (1, 2, 4, 8)
FAST = PlanSettings(slo_s=0.1, num_workers=2, max_batch_size=4, intervals=20, num_loads=5)


def _vp(variant: Variant, accuracy: float, base_ms: float, per_item_ms: float) -> VariantProfile:
    pts = tuple(LatencyPoint(b, base_ms + per_item_ms * b, 1.1 * (base_ms + per_item_ms * b),
                             1.2 * (base_ms + per_item_ms * b), base_ms + per_item_ms * b, 10)
                for b in SIZES)
    return VariantProfile(variant, accuracy, pts)


def family() -> Profile:
    return Profile("family.t", "cpu:test", (_vp(Variant("s", "s"), 0.8, 2, 1),
                                            _vp(Variant("m", "m"), 0.85, 4, 2),
                                            _vp(Variant("l", "l"), 0.9, 8, 4)))


def vit() -> Profile:
    return Profile("vit.d", "cpu:test", tuple(
        _vp(Variant(f"g{g}", "vit", gamma=g), 0.9 - 0.01 * abs(g), 5 + g, 2 + 0.2 * g)
        for g in (-2, -1, 0, 1, 2)))


def fusion() -> Profile:
    mods = [frozenset(m) for m in (["a"], ["b"], ["a", "b"])]
    return Profile("fusion.d", "cpu:test", tuple(
        _vp(Variant("+".join(sorted(m)), "fusion", m), 0.6 + 0.1 * len(m) + 0.01 * i,
            1 + 2 * len(m), 0.5 * len(m)) for i, m in enumerate(mods)))


def _write(tmp: Path, *profiles: Profile) -> dict[str, Path]:
    out = {}
    for p in profiles:
        path = tmp / f"{p.name}.json"
        path.write_text(json.dumps(p.to_dict()))
        out[p.name] = path
    return out


def test_plan_kinds() -> None:
    assert plan_kinds(family()) == [PlanKind.RAMSIS, PlanKind.JELLYFISH]
    assert plan_kinds(vit()) == [PlanKind.OTAS]
    assert plan_kinds(fusion()) == [PlanKind.MOSEL]


def test_load_range_from_capacity() -> None:
    lo, hi = load_range(family(), FAST)
    # fastest variant "s": batch 4 takes 1.1 * (2 + 4) ms at p95 -> 4 / 6.6 ms per worker
    assert hi == pytest.approx(round(2 * 4 / 0.0066, 1))
    assert lo == pytest.approx(1.0)
    assert load_range(family(), PlanSettings(min_qps=5, max_qps=50)) == (5, 50)


def test_ensure_plans_writes_loadable_plans(tmp_path: Path) -> None:
    paths = _write(tmp_path, family(), vit(), fusion())
    plans = ensure_plans(paths, tmp_path / "plans", FAST)
    assert sorted(plans) == ["family.t.jellyfish", "family.t.ramsis", "fusion.d.mosel",
                             "vit.d.otas"]
    assert plans["vit.d.otas"] == tmp_path / "plans" / "vit.d.otas.json"
    assert plans["vit.d.otas"] == plan_file(tmp_path / "plans", "vit", "d", PlanKind.OTAS)
    files = {k: json.loads(p.read_text()) for k, p in plans.items()}
    loaded = {k: plan_from_json(data) for k, data in files.items()}
    fam = family()
    for kind in ("ramsis", "jellyfish"):
        assert files[f"family.t.{kind}"]["source"]["kind"] == kind
        plan = loaded[f"family.t.{kind}"]
        assert isinstance(plan, RamsisPolicySet | LoadGranularPlan) and plan.num_workers == 2
        sched = make_scheduler(kind, fam, plan, {"max_batch_size": 4})
        assert sched.name == kind
    mosel = loaded["fusion.d.mosel"]
    assert isinstance(mosel, MoselPlan)
    model = plan_model(fusion(), mosel.percentile, mosel.max_batch_size)
    assert mosel_matrix(mosel, model).variant_names == ("a", "b", "a+b")
    otas = loaded["vit.d.otas"]
    assert isinstance(otas, OtasPlan) and otas.batching.max_batch_size == 4
    assert LatencyModel.from_profile(fam).names == ("s", "m", "l")


def test_ensure_plans_caches_and_rebuilds(tmp_path: Path) -> None:
    paths = _write(tmp_path, vit())
    plans_dir = tmp_path / "plans"
    first = ensure_plans(paths, plans_dir, FAST, kinds=["otas"])
    mtime = first["vit.d.otas"].stat().st_mtime_ns
    ensure_plans(paths, plans_dir, FAST)
    assert first["vit.d.otas"].stat().st_mtime_ns == mtime  # current: untouched
    changed = Profile("vit.d", "cpu:test", tuple(
        VariantProfile(v.variant, v.accuracy * 0.9, v.latency) for v in vit().variants))
    _write(tmp_path, changed)
    ensure_plans(paths, plans_dir, FAST)
    rebuilt = json.loads(first["vit.d.otas"].read_text())
    assert first["vit.d.otas"].stat().st_mtime_ns != mtime
    assert rebuilt["source"]["settings"]["max_batch_size"] == 4
    other = PlanSettings(max_batch_size=8)
    ensure_plans(paths, plans_dir, other)
    assert json.loads(first["vit.d.otas"].read_text())["max_batch_size"] == 8
    assert ensure_plans(paths, plans_dir, FAST, kinds=["mosel"]) == {}
    first["vit.d.otas"].write_text(json.dumps({**json.loads(first["vit.d.otas"].read_text()),
                                               "kappa": "high"}))  # corrupt: rebuilt
    ensure_plans(paths, plans_dir, other)
    assert json.loads(first["vit.d.otas"].read_text())["kappa"] == 0.8
    with pytest.raises(ValueError, match=r"unknown plan kind 'nope'; valid: \['ramsis'"):
        ensure_plans(paths, plans_dir, FAST, kinds=["nope"])
