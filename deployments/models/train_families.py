"""Train the model families deterministically and cache their weights (safetensors + JSON).

    python -m deployments.models.train_families [--only NAME] [--cache-dir DIR] [--threads N] [--if-stale]

Progress goes to stderr (logging); the held-out test accuracy of every variant and the training
times are written to stdout at the end. Cache layout, per family NAME under the cache dir:
`NAME.safetensors` (the state dict) and `NAME.json` (metadata: config and its hash, code version,
training seconds, test accuracy per task and variant, weights digest). `registry.load_model`
retrains when the config hash differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from deployments.models import family, fusion, ladder, scene_fusion, scene_vit, vit_tokens
from deployments.models.base import ServableModel
from deployments.models.cache import DEFAULT_MODELS_DIR

log = logging.getLogger(__name__)
DEFAULT_CACHE = DEFAULT_MODELS_DIR


@dataclass(frozen=True)
class FamilySpec:
    """How to configure, build, train and serve one family. A family with a `base` is trained
    on top of that family's trained weights: `train(cfg, base_state)` (the base is trained
    first; its config belongs in this family's config hash)."""

    name: str
    config: Callable[[], Any]
    build: Callable[[Any], nn.Module]
    train: Callable[..., tuple[nn.Module, dict[str, dict[str, float]]]]
    servable: Callable[[Any, Any], ServableModel]
    base: str | None = None


SPECS: dict[str, FamilySpec] = {
    "vit": FamilySpec("vit", vit_tokens.VitConfig, vit_tokens.build, vit_tokens.train,
                      lambda model, cfg: vit_tokens.TokenViTServable(model)),
    "fusion": FamilySpec("fusion", fusion.FusionConfig, fusion.build, fusion.train,
                         fusion.FusionServable),
    "family": FamilySpec("family", family.FamilyConfig, family.build, family.train,
                         family.FamilyServable),
    "ladder": FamilySpec("ladder", ladder.LadderConfig, ladder.build, ladder.train,
                         ladder.LadderServable),
    "scenefusion": FamilySpec("scenefusion", scene_fusion.SceneFusionConfig, scene_fusion.build,
                              scene_fusion.train, scene_fusion.SceneFusionServable),
    "scenevit": FamilySpec("scenevit", scene_vit.SceneVitConfig, scene_vit.build, scene_vit.train,
                           scene_vit.SceneViTServable, base="ladder"),
}


def config_hash(cfg: Any) -> str:
    """Stable hash of a family config (its `to_dict()`, which includes the code version)."""
    blob = json.dumps(cfg.to_dict(), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def weights_digest(model: nn.Module) -> str:
    """sha256 over parameter names, shapes and bytes (equal digests = identical weights)."""
    h = hashlib.sha256()
    for key, value in sorted(model.state_dict().items()):
        t = value.detach().cpu().contiguous()
        h.update(key.encode())
        h.update(str(tuple(t.shape)).encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def cache_paths(name: str, cache_dir: Path) -> tuple[Path, Path]:
    return cache_dir / f"{name}.safetensors", cache_dir / f"{name}.json"


def read_metadata(name: str, cache_dir: Path = DEFAULT_CACHE) -> dict[str, Any] | None:
    """The cached metadata of family `name` (None when absent or unreadable)."""
    _, meta_path = cache_paths(name, Path(cache_dir))
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    write(tmp)
    os.replace(tmp, path)


def train_and_save(name: str, cache_dir: Path = DEFAULT_CACHE,
                   cfg: Any | None = None) -> dict[str, Any]:
    """Train family `name` (default config unless `cfg`), write weights then metadata."""
    spec = SPECS[name]
    cfg = spec.config() if cfg is None else cfg
    cache_dir.mkdir(parents=True, exist_ok=True)
    log.info("training %s (config %s)", name, config_hash(cfg))
    start = time.perf_counter()
    if spec.base is None:
        model, accuracy = spec.train(cfg)
    else:
        base_weights = cache_paths(spec.base, cache_dir)[0]
        if not base_weights.is_file():
            raise FileNotFoundError(f"{name} trains on {spec.base}'s weights: train {spec.base} "
                                    f"first (not found: {base_weights})")
        model, accuracy = spec.train(cfg, load_file(str(base_weights)))
    seconds = time.perf_counter() - start
    state = {k: v.detach().cpu().contiguous().clone() for k, v in model.state_dict().items()}
    weights, meta_path = cache_paths(name, cache_dir)
    _atomic_write(weights, lambda p: save_file(state, str(p)))
    meta = {"family": name, "config_hash": config_hash(cfg), "config": cfg.to_dict(),
            "train_seconds": round(seconds, 2), "torch_threads": torch.get_num_threads(),
            "torch_version": torch.__version__, "test_accuracy": accuracy,
            "weights_digest": weights_digest(model)}
    _atomic_write(meta_path, lambda p: p.write_text(json.dumps(meta, indent=2, default=str)))
    log.info("trained %s in %.1fs", name, seconds)
    return meta


def format_report(metas: list[dict[str, Any]], total_seconds: float) -> str:
    lines = []
    for meta in metas:
        lines.append(f"{meta['family']}: trained in {meta['train_seconds']:.1f}s")
        for task, per_variant in meta["test_accuracy"].items():
            for variant, acc in per_variant.items():
                lines.append(f"  {task:8s} {variant:28s} test accuracy {acc:.4f}")
    lines.append(f"total training time: {total_seconds:.1f}s")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SPECS), action="append",
                        help="train only this family (repeatable)")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1: on a shared 2-core machine 2 threads"
                        " spin against other processes and train several times slower)")
    parser.add_argument("--if-stale", action="store_true",
                        help="skip families whose cached config hash is current")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    torch.set_num_threads(args.threads)
    metas = []
    start = time.perf_counter()
    for name in args.only or list(SPECS):
        if args.if_stale:
            meta = read_metadata(name, args.cache_dir)
            if meta is not None and meta.get("config_hash") == config_hash(SPECS[name].config()):
                log.info("%s is current, skipping", name)
                metas.append(meta)
                continue
        metas.append(train_and_save(name, args.cache_dir))
    sys.stdout.write(format_report(metas, time.perf_counter() - start))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
