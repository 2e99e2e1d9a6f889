"""Stage profile files (profiling/stages.py): settings from the Serve config, staleness, the
loader's errors, reuse of a current file, capacities and the CLI's table. No engine runs here
(tests/integration/test_stage_profiles.py measures for real)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli.main import build_parser
from app.cli.profile_stages import stage_table
from policies.generation.stage_profile import (
    FORMAT_VERSION,
    EncoderProfile,
    LLMProfile,
    StageProfiles,
)
from policies.generation.token_routing import Architecture
from profiling.paths import REPO_ROOT, stage_profile_file
from profiling.stages import (
    StageSettings,
    capacity_rows,
    engine_settings_for,
    ensure_stage_profiles,
    fit_lengths,
    load_stage_profiles,
    settings_from_serve_config,
    stale_reason,
    write_stage_profiles,
)

SHA = "a" * 64
HW = "cpu:test cpu"


def profiles(settings: StageSettings, sha: str = SHA, hardware: str = HW) -> StageProfiles:
    meta = {"model_sha256": sha, "settings": settings.fingerprint(), "engine": "vllm",
            "encoder": {"p95_ms": {"1": 2.5, "4": 6.0}},
            "prefill": {"p95_ms": {"16": 4.0}}, "tbt": {"p95_ms": {"1": 2.2}}}
    return StageProfiles("vlm", hardware, EncoderProfile(16, {1: 2.0, 4: 5.0}),
                         LLMProfile(Architecture.DECODER_ONLY, {16: 3.0, 128: 6.0},
                                    {1: 2.0, 8: 2.8}), meta)


def test_settings_follow_the_vlm_serve_config() -> None:
    s = settings_from_serve_config(REPO_ROOT / "serve_config.vlm.yaml")
    assert (s.model, s.engine, s.architecture, s.model_dir) == ("vlm", "vllm", "decoder_only",
                                                                None)
    assert dict(s.engine_settings) == {"max_num_seqs": 32, "kv_cache_gib": 1}
    t = settings_from_serve_config(REPO_ROOT / "serve_config.vlm.yaml", engine="transformers",
                                   repeats=3)
    assert (t.engine, t.repeats) == ("transformers", 3)


def test_a_serve_config_without_generation_is_an_error(tmp_path: Path) -> None:
    cfg = tmp_path / "s.yaml"
    cfg.write_text("applications:\n  - name: a\n    args: {classifiers: []}\n")
    with pytest.raises(ValueError, match="generation"):
        settings_from_serve_config(cfg)
    cfg.write_text("applications:\n  - args: {generation: {engine: tensorrt}}\n")
    with pytest.raises(ValueError):
        settings_from_serve_config(cfg)


def test_engine_settings_are_the_replicas() -> None:
    s = StageSettings(engine_settings={"max_num_seqs": 32, "max_model_len": 4096})
    assert engine_settings_for(s, 256) == {"max_num_seqs": 32, "max_model_len": 256}
    assert engine_settings_for(StageSettings(engine_settings={"max_model_len": 128}), 256)[
        "max_model_len"] == 128
    hf = StageSettings(engine="transformers", engine_settings={"max_num_seqs": 32})
    assert engine_settings_for(hf, 256) == {"max_model_len": 256}


def test_prompt_lengths_are_capped_at_the_context() -> None:
    assert fit_lengths((16, 32, 64, 128, 256, 512), 255) == [16, 32, 64, 128, 255]
    assert fit_lengths((64, 16, 16), 255) == [16, 64]


@pytest.mark.parametrize("bad", [{"encoder_batches": ()}, {"prompt_lengths": (0, 16)},
                                 {"decode_batches": (-1,)}, {"decode_tokens": 1},
                                 {"repeats": 0}, {"threads": 0}, {"warmup": -1}])
def test_bad_settings_are_errors(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        StageSettings(**bad)  # type: ignore[arg-type]


def test_fingerprint_survives_json() -> None:
    fp = StageSettings(engine_settings={"b": 1, "a": 2}).fingerprint()
    assert json.loads(json.dumps(fp)) == fp
    assert fp["encoder_batches"] == [1, 2, 4, 8, 16]


def test_write_and_load_round_trip(tmp_path: Path) -> None:
    path = stage_profile_file(tmp_path, "vlm")
    assert path.name == "vlm.stages.json"
    p = profiles(StageSettings())
    write_stage_profiles(p, path)
    assert load_stage_profiles(path) == p
    assert json.loads(path.read_text())["format_version"] == FORMAT_VERSION


def test_loader_errors_name_the_file_and_the_command(tmp_path: Path) -> None:
    missing = tmp_path / "vlm.stages.json"
    with pytest.raises(FileNotFoundError, match="adaptserve profile --stages"):
        load_stage_profiles(missing)
    missing.write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        load_stage_profiles(missing)
    old = profiles(StageSettings()).to_json()
    old["format_version"] = FORMAT_VERSION - 1
    missing.write_text(json.dumps(old))
    with pytest.raises(ValueError, match=r"vlm\.stages\.json.*format_version"):
        load_stage_profiles(missing)


def test_stale_reasons(tmp_path: Path) -> None:
    settings = StageSettings()
    path = tmp_path / "vlm.stages.json"
    assert stale_reason(path, SHA, settings, HW) == "missing"
    write_stage_profiles(profiles(settings), path)
    assert stale_reason(path, SHA, settings, HW) is None
    assert "model files changed" in str(stale_reason(path, "b" * 64, settings, HW))
    assert "settings" in str(stale_reason(path, SHA, StageSettings(repeats=7), HW))
    assert "settings" in str(stale_reason(
        path, SHA, StageSettings(engine_settings={"max_num_seqs": 8}), HW))
    assert "hardware" in str(stale_reason(path, SHA, settings, "cuda:H100"))
    data = json.loads(path.read_text())
    data["format_version"] = 0
    path.write_text(json.dumps(data))
    assert str(stale_reason(path, SHA, settings, HW)).startswith("unreadable")


def test_a_current_profile_is_reused_without_measuring(tmp_path: Path) -> None:
    import torch

    from deployments.generation.model_files import ModelDir
    from profiling.measure import hardware_string

    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    settings = StageSettings(model_dir=str(model_dir))
    sha = ModelDir.at(model_dir, "vlm").fingerprint
    path = stage_profile_file(tmp_path / "profiles", "vlm")
    write_stage_profiles(profiles(settings, sha, hardware_string(torch.device("cpu"))), path)
    before = path.read_bytes()
    assert ensure_stage_profiles(settings, tmp_path, tmp_path / "profiles") == path
    assert path.read_bytes() == before


def test_capacity_rows_are_the_profiles_arithmetic() -> None:
    p = profiles(StageSettings())
    rows = capacity_rows(p, (250.0, 2000.0), 50.0, (0.0, 0.1))
    assert [(r["ttft_slo_ms"], r["decode_tokens_per_prompt_token"]) for r in rows] == [
        (250.0, 0.0), (250.0, 0.1), (2000.0, 0.0), (2000.0, 0.1)]
    assert rows[0]["encoder_image_tokens_per_s"] == pytest.approx(4 * 16 * 1000 / 5.0, abs=0.1)
    assert rows[0]["llm_prompt_tokens_per_s"] == pytest.approx(128 * 1000 / 6.0, abs=0.1)
    assert rows[1]["llm_prompt_tokens_per_s"] == pytest.approx(
        1000 / (6.0 / 128 + 0.1 * 2.8 / 8), abs=0.1)


def test_stage_table_lists_every_point_and_capacity() -> None:
    text = stage_table(profiles(StageSettings()), (250.0,), 50.0)
    lines = text.splitlines()
    assert any(line.split()[:3] == ["4", "5.00", "6.00"] for line in lines)  # encoder b=4
    assert any(line.split()[:2] == ["128", "6.00"] for line in lines)  # prefill 128 tokens
    assert any(line.split()[:3] == ["8", "2.80", "-"] for line in lines)  # TBT, no p95 kept
    assert any(line.split()[:2] == ["250", "50"] for line in lines)
    assert "12800" in text  # 4 images x 16 tokens in 5 ms


def test_cli_parses_stage_options() -> None:
    args = build_parser().parse_args(["profile", "--stages", "--engine", "transformers",
                                      "--decode-batches", "1,8", "--force"])
    assert args.stages and args.force and args.engine == "transformers"
    assert args.decode_batches == "1,8"
    assert not build_parser().parse_args(["profile"]).stages
