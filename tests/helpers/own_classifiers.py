"""A user's own classifiers, built here the way a download looks on disk (no weights fetched):
three timm architectures saved as safetensors (one in timm's hub layout), a Hugging Face image
classifier saved with `save_pretrained` (its `id2label` names), a TorchScript file, and a
labelled ImageFolder of digit images (sklearn's bundled digits, 3 classes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

LABELS = ("zero", "one", "two")
SIDE = 32
TIMM_ARCHS = {"small": ("resnet10t", {}), "medium": ("resnet18", {}),
              "vit": ("vit_tiny_patch16_224", {"img_size": SIDE, "patch_size": 8})}


def image_folder(root: Path, per_label: int = 12) -> Path:
    """`root/<label>/<n>.png`: RGB 32x32 digit images of 0, 1 and 2."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    for index, label in enumerate(LABELS):
        folder = root / label
        folder.mkdir(parents=True, exist_ok=True)
        picks = np.flatnonzero(digits.target == index)[:per_label]
        for n, i in enumerate(picks):
            grey = (digits.images[i] * 255 / 16).astype(np.uint8)
            img = Image.fromarray(grey, mode="L").resize((SIDE, SIDE)).convert("RGB")
            img.save(folder / f"{n}.png")
    return root


def timm_checkpoints(root: Path) -> list[dict[str, Any]]:
    """Three random-init timm models: two as weight files, the ViT in timm's hub layout
    (config.json with architecture, model_args, label_names, pretrained_cfg)."""
    import timm
    from safetensors.torch import save_file

    torch.manual_seed(0)
    root.mkdir(parents=True, exist_ok=True)
    out: list[dict[str, Any]] = []
    for name, (arch, args) in TIMM_ARCHS.items():
        model = timm.create_model(arch, pretrained=False, num_classes=len(LABELS), **args)
        state = {k: v.contiguous() for k, v in model.state_dict().items()}
        if name == "vit":
            hub = root / name
            hub.mkdir(parents=True, exist_ok=True)
            save_file(state, str(hub / "model.safetensors"))
            (hub / "config.json").write_text(json.dumps({
                "architecture": arch, "num_classes": len(LABELS), "model_args": args,
                "label_names": list(LABELS),
                "pretrained_cfg": {"input_size": [3, SIDE, SIDE], "mean": [0.5] * 3,
                                   "std": [0.5] * 3}}))
            out.append({"name": name, "format": "timm", "path": str(hub), "architecture": arch})
        else:
            path = root / f"{name}.safetensors"
            save_file(state, str(path))
            out.append({"name": name, "format": "timm", "path": str(path), "architecture": arch,
                        "input": {"size": SIDE}})
    return out


def hf_classifier(root: Path) -> Path:
    """A tiny random-init ViT image classifier saved with save_pretrained (+ its
    preprocessor_config.json), labels named in its config's id2label."""
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    config = ViTConfig(image_size=SIDE, patch_size=8, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, num_labels=len(LABELS),
                       id2label=dict(enumerate(LABELS)),
                       label2id={n: i for i, n in enumerate(LABELS)})
    ViTForImageClassification(config).save_pretrained(str(root))
    (root / "preprocessor_config.json").write_text(json.dumps({
        "size": {"height": SIDE, "width": SIDE}, "image_mean": [0.5] * 3,
        "image_std": [0.5] * 3, "do_normalize": True, "do_resize": True}))
    return root


def torchscript_classifier(path: Path) -> Path:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * SIDE * SIDE,
                                                                     len(LABELS)))
    torch.jit.script(model).save(str(path))
    return path
