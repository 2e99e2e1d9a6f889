"""The engines' own settings, checked where the application's config is loaded (never first in
a replica): `engine_settings` against each engine's typed settings, and vLLM's `engine_kwargs`
(passed through to `AsyncEngineArgs` unchanged) against that dataclass's fields, so a misspelt
name is a start-up error naming the valid ones."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

# AsyncEngineArgs fields the server sets itself: where a typed setting holds it, its name
OWN_ARGS: dict[str, str] = {
    "model": "the model directory (generation.model_dir)",
    "max_model_len": "engine_settings.max_model_len",
    "dtype": "engine_settings.dtype",
    "enforce_eager": "engine_settings.enforce_eager",
    "max_num_seqs": "engine_settings.max_num_seqs",
    "gpu_memory_utilization": "engine_settings.gpu_memory_utilization",
    "limit_mm_per_prompt": "engine_settings.max_images",
    "enable_mm_embeds": "the server (the encoder stage's embeddings)",
    "scheduling_policy": "the server (deadline priority: generation.priority)",
    "disable_log_stats": "the server",
}
TRANSFORMERS_SETTINGS = ("max_model_len", "trust_remote_code")


def parallel_devices(kwargs: Mapping[str, Any]) -> int:
    """The devices one vLLM engine spans: tensor x pipeline parallel sizes of `engine_kwargs`."""
    return (int(kwargs.get("tensor_parallel_size") or 1)
            * int(kwargs.get("pipeline_parallel_size") or 1))


def check_engine_kwargs(kwargs: Mapping[str, Any], valid: Iterable[str]) -> None:
    """ValueError naming each key of `kwargs` that is not one of `valid` (with the closest
    names) or that the server sets itself (with where to set it)."""
    names = sorted(set(valid))
    problems = []
    for key in sorted(kwargs):
        if key in OWN_ARGS:
            problems.append(f"{key!r} is set by {OWN_ARGS[key]}")
        elif key not in names:
            near = difflib.get_close_matches(key, names, n=3)
            problems.append(f"{key!r} is not an argument of vLLM's AsyncEngineArgs"
                            + (f" (did you mean {', '.join(map(repr, near))}?)" if near else ""))
    if problems:
        raise ValueError("engine_kwargs: " + "; ".join(problems) + f". Valid: {len(names)} "
                         "AsyncEngineArgs fields, e.g. tensor_parallel_size, quantization, "
                         "kv_cache_dtype, enable_prefix_caching, max_num_batched_tokens, "
                         "trust_remote_code (vllm.engine.arg_utils.EngineArgs)")


def vllm_arg_names() -> list[str]:
    """The fields of the installed vLLM's AsyncEngineArgs (imports vllm: the builder only)."""
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs

    return [f.name for f in dataclasses.fields(AsyncEngineArgs)]


def check_engine_settings(kind: str, settings: Mapping[str, Any]) -> None:
    """`engine_settings` of an engine kind, as its replica will read them (no vllm import)."""
    if kind == "vllm":
        from deployments.engines.vllm_engine import VllmSettings

        VllmSettings(**settings)
    elif kind == "transformers":
        unknown = sorted(set(settings) - set(TRANSFORMERS_SETTINGS))
        if unknown:
            raise ValueError(f"unknown transformers engine settings {unknown}; valid: "
                             f"{list(TRANSFORMERS_SETTINGS)}")
    else:
        raise ValueError(f"unknown engine {kind!r}; valid: ['vllm', 'transformers']")
