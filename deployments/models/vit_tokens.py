"""Token-adaptive ViT family ("vit"): one timm VisionTransformer, per-layer token change gamma.

Architecture: timm `VisionTransformer` on 16x16 grayscale digits with a small convolutional stem
as its patch embedding (patch 2 -> 8x8 = 64 patch tokens + 1 class token), embed 64, depth 6,
4 heads, MLP ratio 2. Linear layers use PyTorch's default init (timm's trains slowly on tiny data).

- gamma < 0 merges |gamma| tokens in every block with ToMe (`tome.py`: bipartite soft matching,
  proportional attention, class token protected; at most half the tokens merge per block).
- gamma > 0 inserts gamma learned prompt tokens per task after the class token (VPT-deep: each
  block gets its own gamma prompts, replacing the previous block's prompt outputs), as OTAS does.
  Prompts are nested: gamma=k uses the first k of the task's max(gammas) prompts.
- Tasks "digits" (10 classes), "parity" (even/odd) and "loops" (0/6/8/9) share the backbone,
  frozen after pretraining on "digits"; linear-probe heads at gamma <= 0, one head per (task,
  gamma > 0) trained with the prompts. Wire format: {"image": base64 PNG/any PIL image, resized
  to 16x16, bright ink on dark}; task in `tasks()`. (scene_vit.py: the same on cluttered scenes.)
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import PatchEmbed
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from deployments.models import training as T
from deployments.models.base import Example, Prediction, ServableModel
from deployments.models.data import (
    IMAGE_SIZE,
    TASK_CLASSES,
    DataConfig,
    DigitLabelNames,
    image_split,
    task_labels,
    to_float,
)
from deployments.models.input_decoding import check_fields, check_task, decode_image, encode_image
from deployments.models.tome import block_forward
from policies.types import Variant

log = logging.getLogger(__name__)
CODE_VERSION = 1
TASKS = ("digits", "parity", "loops")


@dataclass(frozen=True)
class VitConfig:
    data: DataConfig = field(default_factory=DataConfig)
    embed_dim: int = 64
    depth: int = 6
    heads: int = 4
    mlp_ratio: float = 2.0
    patch: int = 2
    stem_channels: int = 32
    stem_kernel: int = 3
    gammas: tuple[int, ...] = (-16, -8, -4, -2, 0, 2, 4, 8)
    pretrain_epochs: int = 20
    probe_epochs: int = 3
    prompt_epochs: int = 3
    batch_size: int = 32
    lr: float = 1e-3
    prompt_lr: float = 5e-3
    seed: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"code_version": CODE_VERSION, **asdict(self)}


class ConvStemEmbed(PatchEmbed):
    """timm PatchEmbed whose projection is conv3x3-GELU-conv3x3-GELU-conv(patch, stride patch)."""

    def __init__(self, *args: Any, stem_channels: int = 32, stem_kernel: int = 3,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        in_chans = kwargs.get("in_chans", 1)
        embed_dim, patch = kwargs["embed_dim"], kwargs["patch_size"]
        c, k = stem_channels, stem_kernel
        self.proj = nn.Sequential(
            nn.Conv2d(in_chans, c // 2, k, padding=k // 2), nn.GELU(),
            nn.Conv2d(c // 2, c, k, padding=k // 2), nn.GELU(),
            nn.Conv2d(c, embed_dim, patch, stride=patch))


class TokenViT(nn.Module):
    """The backbone, per-task prompts and per-(task, gamma) heads."""

    def __init__(self, cfg: VitConfig) -> None:
        super().__init__()
        self.cfg = cfg

        def stem(**kwargs: Any) -> ConvStemEmbed:
            return ConvStemEmbed(stem_channels=cfg.stem_channels, stem_kernel=cfg.stem_kernel,
                                 **kwargs)

        self.backbone = VisionTransformer(
            img_size=IMAGE_SIZE, patch_size=cfg.patch, in_chans=1, num_classes=0,
            embed_dim=cfg.embed_dim, depth=cfg.depth, num_heads=cfg.heads,
            mlp_ratio=cfg.mlp_ratio, embed_layer=stem, global_pool="token")
        T.reset_linear_init(self.backbone)
        d = cfg.embed_dim
        n_prompts = max(0, *cfg.gammas)
        self.prompts = nn.ParameterDict({t: nn.Parameter(0.1 * torch.randn(cfg.depth, n_prompts, d))
                                         for t in TASKS})
        self.heads = nn.ModuleDict({
            self.head_key(t, g): nn.Linear(d, TASK_CLASSES[t])
            for t in TASKS for g in sorted({0, *(g for g in cfg.gammas if g > 0)})})

    @staticmethod
    def head_key(task: str, gamma: int) -> str:
        return f"{task}_g{max(gamma, 0)}"

    def features(self, x: torch.Tensor, task: str, gamma: int) -> tuple[torch.Tensor, list[int]]:
        """Class-token features [B, D] and the token count entering each block (and after)."""
        vit = self.backbone
        return self.through_blocks(vit.norm_pre(vit._pos_embed(vit.patch_embed(x))), task, gamma)

    def through_blocks(self, tokens: torch.Tensor, task: str, gamma: int
                       ) -> tuple[torch.Tensor, list[int]]:  # `features` from embedded tokens on
        vit, counts = self.backbone, []
        if gamma > 0:
            prompts = self.prompts[task][:, :gamma]
            for i, blk in enumerate(vit.blocks):
                rest = tokens[:, 1 + (gamma if i else 0):]
                p = prompts[i].unsqueeze(0).expand(tokens.shape[0], -1, -1)
                tokens = torch.cat([tokens[:, :1], p, rest], dim=1)
                counts.append(tokens.shape[1])
                tokens, _ = block_forward(blk, tokens, None, 0, protected=1 + gamma)
        else:
            size = None
            for blk in vit.blocks:
                counts.append(tokens.shape[1])
                tokens, size = block_forward(blk, tokens, size, -gamma, protected=1)
        counts.append(tokens.shape[1])
        return vit.norm(tokens)[:, 0], counts

    def forward(self, x: torch.Tensor, task: str, gamma: int) -> torch.Tensor:
        feats, _ = self.features(x, task, gamma)
        return self.heads[self.head_key(task, gamma)](feats)


def build(cfg: VitConfig) -> TokenViT:
    with T.deterministic(cfg.seed):
        return TokenViT(cfg)


def _pretrain(model: TokenViT, cfg: VitConfig, gen: torch.Generator) -> None:
    head = model.heads[model.head_key("digits", 0)]
    params = [*model.backbone.parameters(), *head.parameters()]
    steps = cfg.pretrain_epochs * -(-len(image_split("train", cfg.data, 0)[1]) // cfg.batch_size)
    opt, sched = T.optimizer(params, cfg.lr, steps)
    model.train()
    for epoch in range(cfg.pretrain_epochs):
        images, labels = image_split("train", cfg.data, epoch)
        x = to_float(images)
        for idx in T.batches(len(labels), cfg.batch_size, gen):
            loss = F.cross_entropy(model(x[idx], "digits", 0), labels[idx], label_smoothing=0.1)
            T.step(loss, opt, sched)
        log.info("vit pretrain epoch %d loss %.3f", epoch + 1, float(loss.detach()))
    model.eval()


def _probe(model: TokenViT, cfg: VitConfig, tasks: tuple[str, ...],
           gen: torch.Generator) -> None:
    """Linear-probe heads (task, gamma 0) on frozen class-token features (task-independent)."""
    with torch.no_grad():
        feats, digits = [], []
        for epoch in range(cfg.probe_epochs):
            images, labels = image_split("train", cfg.data, 100 + epoch)
            feats.append(model.features(to_float(images), tasks[0], 0)[0])
            digits.append(labels)
    x, d = torch.cat(feats), torch.cat(digits)
    for task in tasks:
        y = task_labels(task, d)
        head = model.heads[model.head_key(task, 0)]
        opt, sched = T.optimizer(list(head.parameters()), 1e-2, 300, weight_decay=1e-3)
        for _ in range(300):
            idx = torch.randint(0, len(y), (256,), generator=gen)
            T.step(F.cross_entropy(head(x[idx]), y[idx]), opt, sched)


def _prompt_tune(model: TokenViT, cfg: VitConfig, task: str, gen: torch.Generator) -> None:
    """Train the task's nested prompts and its gamma > 0 heads (random gamma per batch)."""
    gammas = [g for g in cfg.gammas if g > 0]
    if not gammas or cfg.prompt_epochs <= 0:
        return
    heads = [model.heads[model.head_key(task, g)] for g in gammas]
    base = model.heads[model.head_key(task, 0)]
    for head in heads:
        head.load_state_dict(base.state_dict())
    params = [model.prompts[task], *(p for h in heads for p in h.parameters())]
    n = len(image_split("train", cfg.data, 0)[1])
    opt, sched = T.optimizer(params, cfg.prompt_lr, cfg.prompt_epochs * -(-n // cfg.batch_size),
                             weight_decay=0.0)
    for epoch in range(cfg.prompt_epochs):
        images, digits = image_split("train", cfg.data, 200 + epoch)
        x, y = to_float(images), task_labels(task, digits)
        for idx in T.batches(n, cfg.batch_size, gen):
            gamma = gammas[int(torch.randint(0, len(gammas), (1,), generator=gen))]
            T.step(F.cross_entropy(model(x[idx], task, gamma), y[idx]), opt, sched)
    log.info("vit prompts for %s trained", task)


def train(cfg: VitConfig) -> tuple[TokenViT, dict[str, dict[str, float]]]:
    """Pretrain, freeze, probe and prompt-tune; returns the model and test accuracy per task and
    variant name."""
    model = build(cfg)
    clock = T.Stopwatch("vit")
    with T.deterministic(cfg.seed):
        gen = torch.Generator().manual_seed(cfg.seed)
        _pretrain(model, cfg, gen)
        clock.lap("pretraining")
        model.backbone.requires_grad_(False)
        _probe(model, cfg, TASKS[1:], gen)
        clock.lap("linear probes")
        for task in TASKS:
            _prompt_tune(model, cfg, task, gen)
        clock.lap("prompt tuning")
    model.eval()
    return model, evaluate(model, cfg, "test")


@torch.no_grad()
def evaluate(model: TokenViT, cfg: VitConfig, split: str) -> dict[str, dict[str, float]]:
    """Accuracy per task and variant (features at gamma <= 0 do not depend on the task)."""
    images, digits = image_split(split, cfg.data)
    x = to_float(images)
    out: dict[str, dict[str, float]] = {task: {} for task in TASKS}
    for gamma in cfg.gammas:
        shared = None if gamma > 0 else torch.cat(
            [model.features(x[i:i + 256], TASKS[0], gamma)[0] for i in range(0, len(x), 256)])
        for task in TASKS:
            head = model.heads[model.head_key(task, gamma)]
            feats = shared if shared is not None else torch.cat(
                [model.features(x[i:i + 256], task, gamma)[0] for i in range(0, len(x), 256)])
            correct = (head(feats).argmax(-1) == task_labels(task, digits)).float().mean()
            out[task][variant_name(gamma)] = float(correct)
    return out


def variant_name(gamma: int) -> str:
    return f"vit/g{gamma}"


class TokenViTServable(DigitLabelNames, ServableModel):
    """`ServableModel` over a trained `TokenViT`; variants "vit/g<gamma>"."""
    name = "vit"

    def __init__(self, model: TokenViT) -> None:
        self.model = model.eval()
        self.cfg = model.cfg
        self._variants = tuple(Variant(name=f"{self.name}/g{g}", model=self.name,
                                       modalities=frozenset({"image"}), gamma=g)
                               for g in self.cfg.gammas)

    def variants(self) -> tuple[Variant, ...]:
        return self._variants

    def tasks(self) -> tuple[str, ...]:
        return TASKS

    def modalities(self) -> tuple[str, ...]:
        return ("image",)

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, torch.Tensor]:
        check_task(task, TASKS)
        fields = check_fields(inputs, required=("image",), allowed=("image",))
        return {"image": decode_image(fields["image"], "image", IMAGE_SIZE, IMAGE_SIZE)}

    def run(self, variant: Variant, task: str,
            items: list[dict[str, torch.Tensor]]) -> list[Prediction]:
        if variant not in self._variants:
            raise ValueError(f"unknown variant {variant.name!r} for family {self.name}")
        check_task(task, self.tasks())
        if not items:
            return []
        x = torch.stack([item["image"] for item in items]).to(next(self.model.parameters()).device)
        with torch.inference_mode():
            probs = self.model(x, task, variant.gamma).softmax(-1)
        conf, label = probs.max(-1)
        return [Prediction(label=int(lbl), confidence=float(c))
                for lbl, c in zip(label.tolist(), conf.tolist(), strict=True)]

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        if split not in ("val", "test"):
            raise ValueError(f"split must be 'val' or 'test', got {split!r}")
        check_task(task, TASKS)
        images, digits = image_split(split, self.cfg.data)
        labels = task_labels(task, digits)
        n = len(labels) if limit is None else min(limit, len(labels))
        return [Example(inputs={"image": encode_image(images[i])}, label=int(labels[i]),
                        task=task) for i in range(n)]

    def to(self, device: torch.device) -> TokenViTServable:
        self.model.to(device)
        return self
