"""Profile files on disk (`profiling.paths`: `<profiles_dir>/<model>.<task>.json`), re-measured
only when stale.

A profile is stale when it is missing, unreadable, of another format version, measured with
other batch sizes or threads, or when the model's weights changed: the profile's metadata keeps
`weights_hash` (`model_fingerprint`), a hash of every weight tensor, the variants and the tasks.
Plans built from the profiles live in `profiling/plans.py`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from deployments.models.base import ServableModel
from deployments.models.cache import DEFAULT_MODELS_DIR
from policies.profile import Profile
from profiling.measure import DEFAULT_BATCH_SIZES, profile_model
from profiling.paths import DEFAULT_PROFILES_DIR, profile_name, profile_path

log = logging.getLogger(__name__)

Loader = Callable[[str, Path], ServableModel]


def _modules(value: Any, prefix: str, depth: int = 0) -> Iterator[tuple[str, torch.nn.Module]]:
    """torch modules reachable from `value` through attributes, dicts, lists and tuples."""
    if depth > 3:
        return
    if isinstance(value, torch.nn.Module):
        yield prefix, value
    elif isinstance(value, dict):
        for k in sorted(value, key=str):
            yield from _modules(value[k], f"{prefix}[{k}]", depth + 1)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _modules(v, f"{prefix}[{i}]", depth + 1)
    elif depth == 0 and hasattr(value, "__dict__"):
        for k in sorted(vars(value)):
            yield from _modules(vars(value)[k], k, depth + 1)


def model_fingerprint(model: ServableModel) -> str:
    """A hash of the model's weights (every tensor of every torch module it holds), its variants
    and its tasks: any retraining or change of the variant set changes it."""
    h = hashlib.sha256()
    h.update(model.name.encode())
    h.update(json.dumps([[v.name, v.model, sorted(v.modalities), v.gamma]
                         for v in model.variants()]).encode())
    h.update(json.dumps(list(model.tasks())).encode())
    seen: set[int] = set()
    for prefix, module in _modules(model, ""):
        if id(module) in seen:
            continue
        seen.add(id(module))
        for key, tensor in module.state_dict().items():
            t = tensor.detach().to("cpu").contiguous().reshape(-1)
            h.update(f"{prefix}.{key}:{t.dtype}:{tuple(tensor.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:24]


def load_profile(path: Path) -> Profile:
    return Profile.from_dict(json.loads(Path(path).read_text()))


def write_profile(profile: Profile, path: Path) -> Path:
    """Versioned JSON, written atomically (tmp + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(profile.to_dict(), indent=1))
    tmp.replace(path)
    return path


def stale_reason(path: Path, weights_hash: str, batch_sizes: Sequence[int],
                 threads: int, device: str = "cpu") -> str | None:
    """Why the profile at `path` must be re-measured, or None when it is current."""
    if not path.exists():
        return "missing"
    try:
        profile = load_profile(path)
    except (ValueError, KeyError, TypeError, json.JSONDecodeError) as e:
        return f"unreadable ({e})"
    meta = profile.metadata
    if meta.get("weights_hash") != weights_hash:
        return f"weights changed ({meta.get('weights_hash')} -> {weights_hash})"
    if sorted(meta.get("batch_sizes", [])) != sorted(set(batch_sizes)):
        return f"batch sizes {meta.get('batch_sizes')} != {sorted(set(batch_sizes))}"
    if meta.get("threads") != threads:
        return f"threads {meta.get('threads')} != {threads}"
    if str(meta.get("device", "cpu")) != device:
        return f"device {meta.get('device')} != {device}"
    return None


def registry_loader(name: str, models_dir: Path) -> ServableModel:
    """Load (training on first use, cached) a model family through the project's registry."""
    from deployments.models.registry import load_model

    model: ServableModel = load_model(name, cache_dir=models_dir)
    return model


def registry_metadata(name: str, models_dir: Path) -> dict[str, Any]:
    """The registry's `config_hash` and `weights_digest` of a cached family (traceability;
    staleness itself is decided by `model_fingerprint`). Empty when unavailable or when the
    registry was never imported (a model from another loader: importing it costs seconds)."""
    registry = sys.modules.get("deployments.models.registry")
    if registry is None:
        return {}
    meta = registry.read_metadata(name, Path(models_dir)) or {}
    return {f"model_{k}": meta[k] for k in ("config_hash", "weights_digest") if k in meta}


def _tasks_for(model: ServableModel, tasks: Sequence[str] | None) -> list[str]:
    available = list(model.tasks())
    if tasks is None:
        return available
    chosen = [t for t in tasks if t in available]
    if not chosen:
        raise ValueError(f"{model.name}: none of the tasks {list(tasks)} exist; valid: {available}")
    return chosen


def ensure_profiles(models: Sequence[str], models_dir: Path = DEFAULT_MODELS_DIR,
                    profiles_dir: Path = DEFAULT_PROFILES_DIR, force: bool = False, *,
                    tasks: Sequence[str] | None = None,
                    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES, threads: int = 1,
                    loader: Loader | None = None, progress: bool = True,
                    **measure: Any) -> dict[str, Path]:
    """Profiles for every (model, task) (all tasks of each model unless `tasks` names some),
    measured only where missing or stale (or always with `force`). Returns name -> path.

    `measure` goes to `profile_model` (warmup, repeats, min_time_s, min_repeats, device)."""
    load = loader or registry_loader
    paths: dict[str, Path] = {}
    for model_name in models:
        model = load(model_name, Path(models_dir))
        weights_hash = model_fingerprint(model)
        extra = {"weights_hash": weights_hash, **registry_metadata(model_name, Path(models_dir))}
        for task in _tasks_for(model, tasks):
            name = profile_name(model_name, task)
            path = profile_path(profiles_dir, name)
            reason = "forced" if force else stale_reason(path, weights_hash, batch_sizes, threads,
                                                          str(measure.get("device", "cpu")))
            if reason is None:
                log.info("profile %s is current: %s", name, path)
            else:
                log.info("profiling %s (%s)", name, reason)
                profile = profile_model(model, task, batch_sizes, threads=threads,
                                        progress=progress, name=model_name,
                                        extra_metadata=extra,
                                        **measure)
                write_profile(profile, path)
            paths[name] = path
    return paths
