"""One user checkpoint loaded as a torch module with its input transform and label names:
timm (a weights file, or a directory in timm's hub layout), a Hugging Face image-classification
directory, or TorchScript. What the checkpoint says (timm's `pretrained_cfg`, the directory's
`config.json` / `preprocessor_config.json`) is the default; `InputSpec` fields override it.

Every problem is a `CheckpointError` naming the checkpoint and the path: a missing file, an
unknown timm architecture, weights that do not fit it, an input the model does not take."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from deployments.models.sources import Checkpoint, InputSpec

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class CheckpointError(ValueError):
    """A checkpoint that cannot be served as configured (the message says which and why)."""


@dataclass(frozen=True)
class ImageTransform:
    """Image -> input tensor: resized to size x size, `channels` (1: greyscale, 3: RGB),
    scaled to [0, 1], then (x - mean) / std per channel."""

    size: int
    channels: int
    mean: tuple[float, ...]
    std: tuple[float, ...]

    def normalise(self, pixels: torch.Tensor) -> torch.Tensor:
        mean = torch.tensor(self.mean, dtype=torch.float32).view(-1, 1, 1)
        std = torch.tensor(self.std, dtype=torch.float32).view(-1, 1, 1)
        return (pixels - mean) / std


@dataclass(frozen=True)
class LoadedCheckpoint:
    module: torch.nn.Module
    transform: ImageTransform
    labels: tuple[str, ...] | None  # the checkpoint's own names (None: it has none)
    num_classes: int


def load_checkpoint(ckpt: Checkpoint, defaults: InputSpec) -> LoadedCheckpoint:
    """The checkpoint on CPU in eval mode, checked by one forward pass of its input."""
    path = Path(ckpt.path)
    if not path.exists():
        raise CheckpointError(f"checkpoint {ckpt.name!r}: {path} does not exist")
    try:
        loaded = {"timm": _timm, "hf": _hf, "torchscript": _torchscript}[ckpt.format](
            ckpt, path, _merged(defaults, ckpt.input))
    except CheckpointError:
        raise
    except (OSError, RuntimeError, ValueError, KeyError) as exc:
        raise CheckpointError(f"checkpoint {ckpt.name!r} ({ckpt.format}, {path}): "
                              f"{type(exc).__name__}: {str(exc)[:400]}") from None
    return _probed(ckpt, loaded)


def _merged(defaults: InputSpec, own: InputSpec) -> InputSpec:
    return InputSpec(**{k: v for k, v in {**defaults.model_dump(),
                                          **own.model_dump(exclude_none=True)}.items()})


def _transform(name: str, spec: InputSpec, size: int | None, channels: int,
               mean: Any, std: Any) -> ImageTransform:
    """The checkpoint's own values under the config's overrides; per-channel stats checked."""
    side = spec.size or size
    if side is None:
        raise CheckpointError(f"checkpoint {name!r}: its input size is not known from the "
                              "checkpoint; set input.size")
    chans = spec.channels or channels
    m = tuple(float(x) for x in (spec.mean or mean))
    s = tuple(float(x) for x in (spec.std or std))
    for label, stat in (("mean", m), ("std", s)):
        if len(stat) not in (1, chans):
            raise CheckpointError(f"checkpoint {name!r}: {label} has {len(stat)} values for "
                                  f"{chans} channels")
    return ImageTransform(int(side), int(chans), m, s)


def _state_dict(path: Path) -> dict[str, torch.Tensor]:
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if isinstance(state, Mapping) and "state_dict" in state:
        state = state["state_dict"]
    if not isinstance(state, Mapping):
        raise CheckpointError(f"{path}: not a state dict")
    return dict(state)


def _timm(ckpt: Checkpoint, path: Path, spec: InputSpec) -> LoadedCheckpoint:
    import timm

    hub: dict[str, Any] = {}
    weights = path
    if path.is_dir():  # timm's hub layout: config.json + model.safetensors / pytorch_model.bin
        config = path / "config.json"
        hub = json.loads(config.read_text()) if config.is_file() else {}
        found = [path / n for n in ("model.safetensors", "pytorch_model.bin")
                 if (path / n).is_file()]
        if not found:
            raise CheckpointError(f"checkpoint {ckpt.name!r}: {path} has no model.safetensors "
                                  "or pytorch_model.bin")
        weights = found[0]
    arch = str(ckpt.architecture)
    if not timm.is_model(arch):
        raise CheckpointError(f"checkpoint {ckpt.name!r}: unknown timm architecture {arch!r}")
    state = _state_dict(weights)
    classes = ckpt.num_classes or hub.get("num_classes") or _head_classes(state)
    in_chans = spec.channels or int(hub.get("pretrained_cfg", {}).get("input_size", [3])[0])
    args = {**hub.get("model_args", {}), **ckpt.model_args}
    model = timm.create_model(arch, pretrained=False, num_classes=classes, in_chans=in_chans,
                              **args)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
        problem = (f"missing {list(missing)[:4]}, unexpected {list(unexpected)[:4]}"
                   if missing or unexpected else "")
    except RuntimeError as exc:  # shapes that differ
        problem = str(exc).split("\n\t")[1] if "\n\t" in str(exc) else str(exc)[:300]
    if problem:
        raise CheckpointError(f"checkpoint {ckpt.name!r}: weights {weights} do not fit timm "
                              f"{arch!r} with {classes} classes ({problem})")
    cfg = {**model.pretrained_cfg, **hub.get("pretrained_cfg", {})}
    input_size = cfg.get("input_size", (in_chans, None, None))
    labels = hub.get("label_names") or cfg.get("label_names")
    side = args.get("img_size", input_size[-1])
    transform = _transform(ckpt.name, spec, side, in_chans,
                           cfg.get("mean", IMAGENET_MEAN), cfg.get("std", IMAGENET_STD))
    return LoadedCheckpoint(model.eval(), transform, _labels(labels), int(classes))


def _head_classes(state: Mapping[str, torch.Tensor]) -> int:
    """Classes of a state dict's last 2-d weight (its classifier head)."""
    heads = [t for k, t in state.items() if k.endswith("weight") and t.dim() == 2]
    if not heads:
        raise CheckpointError("no classifier head in the weights; set num_classes")
    return int(heads[-1].shape[0])


def _hf(ckpt: Checkpoint, path: Path, spec: InputSpec) -> LoadedCheckpoint:
    from transformers import AutoConfig, AutoModelForImageClassification

    if not (path / "config.json").is_file():
        raise CheckpointError(f"checkpoint {ckpt.name!r}: {path} is not a Hugging Face model "
                              "directory (no config.json)")
    config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    model = AutoModelForImageClassification.from_pretrained(str(path), local_files_only=True)
    pre_file = path / "preprocessor_config.json"
    pre = json.loads(pre_file.read_text()) if pre_file.is_file() else {}
    size = pre.get("size", getattr(config, "image_size", None))
    if isinstance(size, Mapping):
        size = size.get("height") or size.get("shortest_edge")
    channels = int(getattr(config, "num_channels", 3))
    id2label = getattr(config, "id2label", None) or {}
    labels = [id2label[i] for i in sorted(id2label)] if id2label else None
    transform = _transform(ckpt.name, spec, size, channels, pre.get("image_mean", [0.5] * 3),
                           pre.get("image_std", [0.5] * 3))
    return LoadedCheckpoint(_LogitsOnly(model.eval()), transform, _labels(labels),
                            int(config.num_labels))


class _LogitsOnly(torch.nn.Module):
    """A transformers classifier called on pixel values, returning its logits."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.model(pixel_values=pixels).logits


def _torchscript(ckpt: Checkpoint, path: Path, spec: InputSpec) -> LoadedCheckpoint:
    module = torch.jit.load(str(path), map_location="cpu")
    transform = _transform(ckpt.name, spec, None, 3, [0.0], [1.0])
    classes = int(module(torch.zeros(1, transform.channels, transform.size,
                                     transform.size)).shape[-1])
    return LoadedCheckpoint(module.eval(), transform, None, classes)


def _labels(names: Any) -> tuple[str, ...] | None:
    if not names:
        return None
    return tuple(str(n) for n in names)


def _probed(ckpt: Checkpoint, loaded: LoadedCheckpoint) -> LoadedCheckpoint:
    """One forward pass of the configured input: a size or channel count the model does not
    take is an error at start, not at the first request."""
    t = loaded.transform
    try:
        with torch.inference_mode():
            out = loaded.module(torch.zeros(1, t.channels, t.size, t.size))
    except Exception as exc:  # any torch failure on the probe means a misconfigured input
        raise CheckpointError(
            f"checkpoint {ckpt.name!r}: the model does not take a {t.channels}x{t.size}x{t.size} "
            f"input (input size or channels disagree with the checkpoint): "
            f"{type(exc).__name__}: {str(exc)[:300]}") from None
    if out.dim() != 2 or out.shape[-1] != loaded.num_classes:
        raise CheckpointError(f"checkpoint {ckpt.name!r}: output shape {tuple(out.shape)}, "
                              f"expected [batch, {loaded.num_classes}] logits")
    return loaded
