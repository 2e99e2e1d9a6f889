"""`ensure_vlm`: the trained model directory, trained and saved on first use.

One directory per config hash (`<cache_root>/vlm-<hash>/`, the hash covers the config and its
`CODE_VERSION`), so a second call, or any other process, loads instantly; a file lock serialises
concurrent first uses, and the directory appears whole (written beside it, then renamed).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path

import torch

from deployments.models.cache import DEFAULT_MODELS_DIR, file_lock
from deployments.models.train_families import weights_digest
from deployments.models.vlm.config import VlmConfig
from deployments.models.vlm.evaluate import held_out_accuracy
from deployments.models.vlm.export import read_meta, save_model_dir
from deployments.models.vlm.fit import fit
from deployments.models.vlm.tokenizer import build_tokenizer

log = logging.getLogger(__name__)


def model_dir_for(cfg: VlmConfig, cache_root: Path = DEFAULT_MODELS_DIR) -> Path:
    return Path(cache_root) / f"vlm-{cfg.config_hash()}"


def is_current(model_dir: Path, cfg: VlmConfig) -> bool:
    meta = read_meta(model_dir)
    return meta is not None and meta.get("config_hash") == cfg.config_hash()


def ensure_vlm(cache_root: Path = DEFAULT_MODELS_DIR, cfg: VlmConfig | None = None,
               threads: int = 1) -> Path:
    """The model directory of `cfg` (default: the shipped config) under `cache_root`, trained
    (on `threads` torch threads, at most 2), evaluated and saved first unless a current one is
    there. One thread by default: on a shared 2-core machine two threads spin against other
    processes (docs/models.md)."""
    cfg = VlmConfig() if cfg is None else cfg
    target = model_dir_for(cfg, cache_root)
    if is_current(target, cfg):
        return target
    with file_lock(Path(cache_root) / ".vlm.lock"):
        if not is_current(target, cfg):
            log.info("vlm: no current model in %s, training", target)
            previous = torch.get_num_threads()
            torch.set_num_threads(max(1, min(threads, 2)))
            try:
                _train_into(cfg, target)
            finally:
                torch.set_num_threads(previous)
    return target


def _train_into(cfg: VlmConfig, target: Path) -> None:
    tok = build_tokenizer()
    start = time.perf_counter()
    result = fit(cfg, tok)
    train_s = time.perf_counter() - start
    accuracy = held_out_accuracy(result.model, tok, cfg)
    meta = {"config_hash": cfg.config_hash(), "config": cfg.to_dict(),
            "train_seconds": round(train_s, 2), "tower_seconds": round(result.tower_s, 2),
            "decoder_seconds": round(result.decoder_s, 2),
            "tower_classifier_test_accuracy": round(result.tower_test_accuracy, 4),
            "torch_threads": torch.get_num_threads(), "torch_version": torch.__version__,
            "load_average_1m": round(os.getloadavg()[0], 2),
            "held_out_accuracy": accuracy, "weights_digest": weights_digest(result.model)}
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    save_model_dir(result.model, tok, cfg, tmp, meta)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
    log.info("vlm: trained in %.1fs, held-out accuracy %s, saved %s", train_s, accuracy, target)
