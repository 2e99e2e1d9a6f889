"""`adaptserve profile --stages`: the generation model's stage profiles (ModServe 4.1,
profiling/stages.py), measured or reused while current, printed as a table."""

from __future__ import annotations

import argparse
from typing import Any

from policies.generation.stage_profile import StageProfiles


def _csv_ints(text: str) -> tuple[int, ...]:
    return tuple(int(t) for t in text.split(",") if t.strip())


def _csv_floats(text: str) -> tuple[float, ...]:
    return tuple(float(t) for t in text.split(",") if t.strip())


def _p95(profiles: StageProfiles, section: str, key: int) -> str:
    value = profiles.metadata.get(section, {}).get("p95_ms", {}).get(str(key))
    return f"{value:9.2f}" if isinstance(value, int | float) else f"{'-':>9}"


def stage_table(profiles: StageProfiles, ttft_slos_ms: tuple[float, ...],
                tbt_slo_ms: float) -> str:
    """Encoder ms and image tokens/s per batch; prefill ms and tokens/s per prompt length;
    TBT per decode batch; one replica's capacities at the SLOs."""
    from profiling.stages import capacity_rows

    enc, llm, meta = profiles.encoder, profiles.llm, profiles.metadata
    lines = [f"stage profile {profiles.model} on {profiles.hardware}: engine "
             f"{meta.get('engine')} {meta.get('engine_settings')}, threads {meta.get('threads')},"
             f" {meta.get('date')}, load avg (1 min) {meta.get('load_avg_1m_start')}",
             f"encoder ({enc.tokens_per_image} tokens per image)",
             f"{'images':>8}{'p50 ms':>9}{'p95 ms':>9}{'ms/image':>10}{'image tok/s':>13}"]
    for b, ms in enc.batch_latency_ms.items():
        lines.append(f"{b:>8}{ms:9.2f}{_p95(profiles, 'encoder', b)}{ms / b:10.3f}"
                     f"{b * enc.tokens_per_image * 1000 / ms:13.0f}")
    lines += ["LLM prefill (time to the first token, max_tokens 1)",
              f"{'tokens':>8}{'p50 ms':>9}{'p95 ms':>9}{'prompt tok/s':>14}"]
    for n, ms in llm.prefill_ms.items():
        lines.append(f"{n:>8}{ms:9.2f}{_p95(profiles, 'prefill', n)}{n * 1000 / ms:14.0f}")
    lines += ["LLM decode (time between tokens per running sequence)",
              f"{'batch':>8}{'TBT p50':>9}{'p95 ms':>9}{'tokens/s':>14}"]
    for b, ms in llm.tbt_ms.items():
        lines.append(f"{b:>8}{ms:9.2f}{_p95(profiles, 'tbt', b)}{b * 1000 / ms:14.0f}")
    lines += ["capacity of one replica (each stage plans with half the SLO)",
              f"{'TTFT SLO':>10}{'TBT SLO':>9}{'decode/prompt':>15}{'encoder image tok/s':>21}"
              f"{'LLM prompt tok/s':>18}"]
    for row in capacity_rows(profiles, ttft_slos_ms, tbt_slo_ms):
        lines.append(f"{row['ttft_slo_ms']:>10g}{row['tbt_slo_ms']:>9g}"
                     f"{row['decode_tokens_per_prompt_token']:>15g}"
                     f"{row['encoder_image_tokens_per_s']:>21.0f}"
                     f"{row['llm_prompt_tokens_per_s']:>18.0f}")
    return "\n".join(lines)


def cmd_profile_stages(args: argparse.Namespace) -> int:
    from profiling.stages import (
        ensure_stage_profiles,
        load_stage_profiles,
        settings_from_serve_config,
    )

    overrides: dict[str, Any] = {
        "encoder_batches": _csv_ints(args.encoder_batches),
        "prompt_lengths": _csv_ints(args.prompt_lengths),
        "decode_batches": _csv_ints(args.decode_batches), "decode_tokens": args.decode_tokens,
        "warmup": args.warmup, "repeats": args.repeats, "decode_repeats": args.decode_repeats,
        "threads": args.threads}
    if args.engine:
        overrides["engine"] = args.engine
    settings = settings_from_serve_config(args.serve_config, **overrides)
    path = ensure_stage_profiles(settings, args.models_dir, args.out, args.force)
    print(stage_table(load_stage_profiles(path), _csv_floats(args.ttft_slo_ms), args.tbt_slo_ms))
    print(f"  {path}")
    return 0


def add_stage_arguments(p: argparse.ArgumentParser) -> None:
    """The `--stages` options of `adaptserve profile` (--out, --models-dir, --threads,
    --warmup, --repeats and --force are shared with the families' profiles)."""
    from profiling.stages import DEFAULT_SERVE_CONFIG, DEFAULT_TBT_SLO_MS, DEFAULT_TTFT_SLOS_MS

    g = p.add_argument_group("stage profiles (--stages)")
    g.add_argument("--stages", action="store_true",
                   help="measure the generation model's stages (encoder, prefill, decode) "
                        "instead of the classifier families")
    g.add_argument("--serve-config", default=DEFAULT_SERVE_CONFIG,
                   help="the Serve config whose `generation:` block (model, engine, engine "
                        "settings, architecture) is profiled")
    g.add_argument("--engine", default=None, choices=["vllm", "transformers"],
                   help="the LLM engine (default: the serve config's)")
    g.add_argument("--encoder-batches", default="1,2,4,8,16", help="images per encoder batch")
    g.add_argument("--prompt-lengths", default="16,32,64,128,256,512",
                   help="prompt tokens per prefill (capped at the model's context)")
    g.add_argument("--decode-batches", default="1,2,4,8,16,32",
                   help="sequences decoding together")
    g.add_argument("--decode-tokens", type=int, default=32, help="tokens each sequence decodes")
    g.add_argument("--decode-repeats", type=int, default=5,
                   help="rounds per decode batch (each gives one sample per sequence)")
    g.add_argument("--ttft-slo-ms", default=",".join(f"{s:g}" for s in DEFAULT_TTFT_SLOS_MS),
                   help="comma list of TTFT SLOs the capacities are printed at")
    g.add_argument("--tbt-slo-ms", type=float, default=DEFAULT_TBT_SLO_MS)
