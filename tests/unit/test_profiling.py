"""The profiler on a tiny real torch ServableModel (a test double for the profiler, not a model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import profiling.artifacts as artifacts
from deployments.models.base import Example, InputError, Prediction, ServableModel
from policies.profile import LatencyModel, Profile
from policies.types import Variant
from profiling.artifacts import ensure_profiles, load_profile, model_fingerprint
from profiling.measure import latency_point, profile_model

NUM_TEST = 20
WRONG_TAIL = 5  # the last items' labels disagree with argmax(x): the "oracle" misses them


class TinyModel(ServableModel):
    """Two linear heads over 3 features: "oracle" predicts argmax(x), "zero" always class 0."""

    name = "tiny"

    def __init__(self) -> None:
        oracle = torch.nn.Linear(3, 3)
        zero = torch.nn.Linear(3, 3)
        with torch.no_grad():
            oracle.weight.copy_(torch.eye(3))
            oracle.bias.zero_()
            zero.weight.zero_()
            zero.bias.copy_(torch.tensor([1.0, 0.0, 0.0]))
        self.heads = torch.nn.ModuleDict({"oracle": oracle, "zero": zero})

    def variants(self) -> tuple[Variant, ...]:
        return (Variant("oracle", "tiny"), Variant("zero", "tiny"))

    def tasks(self) -> tuple[str, ...]:
        return ("default", "other")

    def modalities(self) -> tuple[str, ...]:
        return ("x",)

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, torch.Tensor]:
        x = inputs.get("x")
        if not isinstance(x, list) or len(x) != 3:
            raise InputError("x: expected a list of 3 floats")
        return {"x": torch.tensor(x, dtype=torch.float32)}

    def run(self, variant: Variant, task: str,
            items: list[dict[str, torch.Tensor]]) -> list[Prediction]:
        with torch.no_grad():
            probs = self.heads[variant.name](torch.stack([i["x"] for i in items])).softmax(-1)
        conf, label = probs.max(-1)
        return [Prediction(int(k), float(c)) for k, c in zip(label, conf, strict=True)]

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        gen = torch.Generator().manual_seed(0 if split == "test" else 1)
        out = []
        for i in range(NUM_TEST):
            x = torch.rand(3, generator=gen)
            label = int(x.argmax())
            if i >= NUM_TEST - WRONG_TAIL:
                label = (label + 1) % 3
            out.append(Example({"x": x.tolist()}, label, task))
        return out[:limit]


FAST: dict[str, Any] = {"warmup": 1, "repeats": 4, "min_repeats": 2, "min_time_s": 0.0,
                        "progress": False}


@pytest.fixture(scope="module")
def profile() -> Profile:
    return profile_model(TinyModel(), "default", batch_sizes=(4, 1, 2, 8), **FAST)


def test_points_per_batch_size_sorted_and_ordered(profile: Profile) -> None:
    assert profile.name == "tiny.default"
    assert profile.names() == ["oracle", "zero"]
    for vp in profile.variants:
        assert [p.batch_size for p in vp.latency] == [1, 2, 4, 8]
        for p in vp.latency:
            assert p.num_samples == FAST["min_repeats"]  # min_time_s=0: stops at min_repeats
            assert p.p50_ms > 0 and p.mean_ms > 0
    LatencyModel.from_profile(profile)  # usable by the policies as is


def test_accuracy_is_measured_on_full_test_split(profile: Profile) -> None:
    model = TinyModel()
    test = model.examples("test", "default")
    assert len(test) == NUM_TEST
    assert profile.by_name("oracle").accuracy == pytest.approx((NUM_TEST - WRONG_TAIL) / NUM_TEST)
    zeros = sum(ex.label == 0 for ex in test)
    assert profile.by_name("zero").accuracy == pytest.approx(zeros / NUM_TEST)
    assert profile.metadata["test_items"] == NUM_TEST


def test_metadata(profile: Profile) -> None:
    meta = profile.metadata
    assert profile.hardware.startswith("cpu:")
    assert meta["model"] == "tiny" and meta["task"] == "default"
    assert meta["threads"] == 1 and meta["torch"] == torch.__version__
    assert meta["batch_sizes"] == [1, 2, 4, 8]
    assert "date" in meta


def test_json_round_trip(profile: Profile) -> None:
    data = json.loads(json.dumps(profile.to_dict()))
    assert data["format_version"] == 1
    again = Profile.from_dict(data)
    assert again == profile


def test_threads_restored_and_unknown_task() -> None:
    before = torch.get_num_threads()
    profile_model(TinyModel(), "other", batch_sizes=(1,), threads=1, **FAST)
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="unknown task"):
        profile_model(TinyModel(), "nope", **FAST)


def test_latency_point_percentiles() -> None:
    p = latency_point(4, [1.0, 2.0, 3.0, 4.0, 100.0])
    assert (p.p50_ms, p.p95_ms, p.p99_ms) == pytest.approx((3.0, 80.8, 96.16))
    assert p.mean_ms == pytest.approx(22.0) and p.num_samples == 5


def test_staleness_triggers_reprofile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = TinyModel()
    calls: list[str] = []
    real = artifacts.profile_model

    def counting(m: ServableModel, task: str, *args: Any, **kwargs: Any) -> Profile:
        calls.append(task)
        return real(m, task, *args, **kwargs)

    monkeypatch.setattr(artifacts, "profile_model", counting)
    opts: dict[str, Any] = {k: v for k, v in FAST.items()}
    opts.update(tasks=["default"], batch_sizes=(1, 2), loader=lambda _n, _d: model)
    paths = ensure_profiles(["tiny"], tmp_path / "models", tmp_path / "profiles", **opts)
    assert list(paths) == ["tiny.default"]
    assert paths["tiny.default"] == tmp_path / "profiles" / "tiny.default.json"
    assert calls == ["default"]
    first = load_profile(paths["tiny.default"])
    assert first.metadata["weights_hash"] == model_fingerprint(model)

    ensure_profiles(["tiny"], tmp_path / "models", tmp_path / "profiles", **opts)
    assert calls == ["default"]  # current: not re-measured

    with torch.no_grad():
        model.heads["zero"].bias.add_(0.5)  # "retrained"
    ensure_profiles(["tiny"], tmp_path / "models", tmp_path / "profiles", **opts)
    assert calls == ["default", "default"]
    assert load_profile(paths["tiny.default"]).metadata["weights_hash"] == model_fingerprint(model)

    opts["batch_sizes"] = (1, 2, 4)  # other batch sizes: stale too
    ensure_profiles(["tiny"], tmp_path / "models", tmp_path / "profiles", **opts)
    ensure_profiles(["tiny"], tmp_path / "models", tmp_path / "profiles", force=True, **opts)
    assert len(calls) == 4


def test_a_profile_measured_on_another_device_is_stale(tmp_path: Path) -> None:
    """Latency is profiled on the replicas' device: a CPU profile is re-measured for CUDA
    replicas (and one of the replicas' own device is current)."""
    model = TinyModel()
    paths = ensure_profiles(["tiny"], tmp_path, tmp_path / "p", tasks=["default"],
                            batch_sizes=(1,), loader=lambda _n, _d: model, **FAST)
    path, weights = paths["tiny.default"], model_fingerprint(model)
    assert artifacts.stale_reason(path, weights, (1,), 1, "cpu") is None
    assert artifacts.stale_reason(path, weights, (1,), 1, "cuda") == "device cpu != cuda"


def test_all_tasks_by_default(tmp_path: Path) -> None:
    paths = ensure_profiles(["tiny"], tmp_path, tmp_path / "p", batch_sizes=(1,),
                            loader=lambda _n, _d: TinyModel(), **FAST)
    assert sorted(paths) == ["tiny.default", "tiny.other"]
    with pytest.raises(ValueError, match="none of the tasks"):
        ensure_profiles(["tiny"], tmp_path, tmp_path / "p", tasks=["x"],
                        loader=lambda _n, _d: TinyModel(), **FAST)


def test_cli_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    monkeypatch.setattr(artifacts, "registry_loader", lambda _n, _d: TinyModel())
    rc = main(["profile", "--models", "tiny", "--tasks", "default", "--batch-sizes", "1,2",
               "--out", str(tmp_path), "--repeats", "3", "--min-time-s", "0", "--warmup", "1",
               "--plans", "--plans-dir", str(tmp_path / "plans"), "--plan-max-batch", "2",
               "--plan-kinds", "jellyfish,otas"])
    out = capsys.readouterr().out
    assert rc == 0
    assert (tmp_path / "tiny.default.json").exists()
    assert "oracle" in out and "0.7500" in out and "p95@2" in out
    assert (tmp_path / "plans" / "tiny.default.jellyfish.json").exists()
    assert not (tmp_path / "plans" / "tiny.default.ramsis.json").exists()  # not asked for


@pytest.mark.slow
def test_profile_real_family(trained_models_dir: Path) -> None:
    """The real "family" model (trained once per session), small batches and repeats."""
    from deployments.models.registry import load_model
    from deployments.models.train_families import read_metadata

    model = load_model("family", cache_dir=trained_models_dir)
    measured = (read_metadata("family", trained_models_dir) or {})["test_accuracy"]
    task = model.tasks()[0]
    prof = profile_model(model, task, batch_sizes=(1, 4), warmup=1, repeats=3, min_repeats=2,
                         min_time_s=0.0, progress=False, name="family")
    assert prof.name == f"family.{task}"
    assert prof.names() == [v.name for v in model.variants()]
    assert prof.metadata["test_items"] == len(model.examples("test", task))
    for vp in prof.variants:
        assert [p.batch_size for p in vp.latency] == [1, 4]
        assert all(p.p50_ms > 0 for p in vp.latency)
        # the profile's accuracy is the training script's held-out accuracy, re-measured
        assert vp.accuracy == pytest.approx(measured[task][vp.variant.name])
    assert Profile.from_dict(json.loads(json.dumps(prof.to_dict()))) == prof
