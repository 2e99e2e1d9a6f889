"""Token-adaptive ViT family ("vit"): one timm VisionTransformer, per-layer token change gamma.

Architecture: timm `VisionTransformer` on 16x16 grayscale digits with a small convolutional stem
as its patch embedding (patch 2 -> 8x8 = 64 patch tokens + 1 class token), embed 64, depth 6,
4 heads, MLP ratio 2. Linear layers use PyTorch's default init (timm's trains slowly on tiny data).

- gamma < 0 merges |gamma| tokens in every block with ToMe (`tome.py`: bipartite soft matching,
  proportional attention, class token protected; at most half the tokens merge per block).
- gamma > 0 inserts gamma learned prompt tokens per task after the class token (VPT-deep: each
  block gets its own gamma prompts, replacing the previous block's prompt outputs), as OTAS does.
  Prompts are nested: gamma=k uses the first k of the task's max(gammas) prompts.
- Tasks "digits" (10 classes), "parity" (2: even/odd) and "loops" (2: 0/6/8/9 have a closed loop)
  share the backbone, frozen after pretraining on "digits"; parity/loops get linear-probe heads at
  gamma <= 0, and every (task, gamma > 0) gets its own head trained with the prompts.

Wire format (`decode`): {"image": base64 PNG/any PIL-readable image, grayscale or RGB, any size
(resized to 16x16), bright ink on dark background}; task in `tasks()`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from timm.layers import PatchEmbed
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from deployments.models import training as T
from deployments.models.data import (
    IMAGE_SIZE,
    TASK_CLASSES,
    DataConfig,
    image_split,
    task_labels,
    to_float,
)
from deployments.models.tome import block_forward

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

    def __init__(self, cfg: Any, img_size: int = IMAGE_SIZE) -> None:
        super().__init__()
        self.cfg = cfg

        def stem(**kwargs: Any) -> ConvStemEmbed:
            return ConvStemEmbed(stem_channels=cfg.stem_channels, stem_kernel=cfg.stem_kernel,
                                 **kwargs)

        self.backbone = VisionTransformer(
            img_size=img_size, patch_size=cfg.patch, in_chans=1, num_classes=0,
            embed_dim=cfg.embed_dim, depth=cfg.depth, num_heads=cfg.heads,
            mlp_ratio=cfg.mlp_ratio, embed_layer=stem, global_pool="token")
        T.reset_linear_init(self.backbone)
        d = cfg.embed_dim
        n_prompts = max(0, *cfg.gammas)
        self.prompts = nn.ParameterDict({
            t: nn.Parameter(0.1 * torch.randn(cfg.depth, n_prompts, d)) for t in TASKS})
        self.heads = nn.ModuleDict({
            self.head_key(t, g): nn.Linear(d, TASK_CLASSES[t])
            for t in TASKS for g in sorted({0, *(g for g in cfg.gammas if g > 0)})})

    @staticmethod
    def head_key(task: str, gamma: int) -> str:
        return f"{task}_g{max(gamma, 0)}"

    def features(self, x: torch.Tensor, task: str, gamma: int) -> tuple[torch.Tensor, list[int]]:
        """Class-token features [B, D] and the token count entering each block (and after)."""
        vit = self.backbone
        tokens = vit.norm_pre(vit._pos_embed(vit.patch_embed(x)))
        counts: list[int] = []
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


TrainData = Callable[[int], tuple[torch.Tensor, torch.Tensor]]  # epoch -> (float images, digits)


def digit_data(cfg: VitConfig) -> TrainData:
    """Fresh training views of the digits per epoch, as float images and digit labels."""
    def data(epoch: int) -> tuple[torch.Tensor, torch.Tensor]:
        images, digits = image_split("train", cfg.data, epoch)
        return to_float(images), digits
    return data


def pretrain(model: TokenViT, cfg: Any, gen: torch.Generator, data: TrainData,
             merge_gammas: tuple[int, ...] = (0,)) -> None:
    """Backbone and digits head, label smoothing; with several `merge_gammas` each batch runs at
    one drawn at random (ToMe while training: cheaper steps, and a backbone used to merging)."""
    head = model.heads[model.head_key("digits", 0)]
    params = [*model.backbone.parameters(), *head.parameters()]
    steps = cfg.pretrain_epochs * -(-len(data(0)[1]) // cfg.batch_size)
    opt, sched = T.optimizer(params, cfg.lr, steps)
    model.train()
    for epoch in range(cfg.pretrain_epochs):
        x, labels = data(epoch)
        for idx in T.batches(len(labels), cfg.batch_size, gen):
            gamma = merge_gammas[0] if len(merge_gammas) == 1 else merge_gammas[
                int(torch.randint(0, len(merge_gammas), (1,), generator=gen))]
            loss = F.cross_entropy(model(x[idx], "digits", gamma), labels[idx],
                                   label_smoothing=0.1)
            T.step(loss, opt, sched)
        log.info("vit pretrain epoch %d/%d loss %.3f", epoch + 1, cfg.pretrain_epochs,
                 float(loss.detach()))
    model.eval()


def probe(model: TokenViT, cfg: Any, tasks: tuple[str, ...], gen: torch.Generator,
          data: TrainData) -> None:
    """Linear-probe heads (task, gamma 0) on frozen class-token features (task-independent)."""
    with torch.no_grad():
        feats, digits = [], []
        for epoch in range(cfg.probe_epochs):
            x, labels = data(100 + epoch)
            feats.append(torch.cat([model.features(x[i:i + 256], tasks[0], 0)[0]
                                    for i in range(0, len(x), 256)]))
            digits.append(labels)
    x, d = torch.cat(feats), torch.cat(digits)
    for task in tasks:
        y = task_labels(task, d)
        head = model.heads[model.head_key(task, 0)]
        opt, sched = T.optimizer(list(head.parameters()), 1e-2, 300, weight_decay=1e-3)
        for _ in range(300):
            idx = torch.randint(0, len(y), (256,), generator=gen)
            T.step(F.cross_entropy(head(x[idx]), y[idx]), opt, sched)


def prompt_tune(model: TokenViT, cfg: Any, task: str, gen: torch.Generator,
                data: TrainData) -> None:
    """Train the task's nested prompts and its gamma > 0 heads (random gamma per batch)."""
    gammas = [g for g in cfg.gammas if g > 0]
    if not gammas or cfg.prompt_epochs <= 0:
        return
    heads = [model.heads[model.head_key(task, g)] for g in gammas]
    base = model.heads[model.head_key(task, 0)]
    for head in heads:
        head.load_state_dict(base.state_dict())
    params = [model.prompts[task], *(p for h in heads for p in h.parameters())]
    n = len(data(200)[1])
    opt, sched = T.optimizer(params, cfg.prompt_lr, cfg.prompt_epochs * -(-n // cfg.batch_size),
                             weight_decay=0.0)
    for epoch in range(cfg.prompt_epochs):
        x, digits = data(200 + epoch)
        y = task_labels(task, digits)
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
        data = digit_data(cfg)
        pretrain(model, cfg, gen, data)
        clock.lap("pretraining")
        model.backbone.requires_grad_(False)
        probe(model, cfg, TASKS[1:], gen, data)
        clock.lap("linear probes")
        for task in TASKS:
            prompt_tune(model, cfg, task, gen, data)
        clock.lap("prompt tuning")
    model.eval()
    return model, evaluate(model, cfg, "test")


def evaluate(model: TokenViT, cfg: VitConfig, split: str) -> dict[str, dict[str, float]]:
    images, digits = image_split(split, cfg.data)
    return accuracy(model, cfg.gammas, to_float(images), digits, "vit")


@torch.no_grad()
def accuracy(model: TokenViT, gammas: tuple[int, ...], x: torch.Tensor, digits: torch.Tensor,
             family: str) -> dict[str, dict[str, float]]:
    """Accuracy per task and variant (features at gamma <= 0 do not depend on the task)."""
    out: dict[str, dict[str, float]] = {task: {} for task in TASKS}
    for gamma in gammas:
        shared = None if gamma > 0 else torch.cat(
            [model.features(x[i:i + 256], TASKS[0], gamma)[0] for i in range(0, len(x), 256)])
        for task in TASKS:
            head = model.heads[model.head_key(task, gamma)]
            feats = shared if shared is not None else torch.cat(
                [model.features(x[i:i + 256], task, gamma)[0] for i in range(0, len(x), 256)])
            correct = (head(feats).argmax(-1) == task_labels(task, digits)).float().mean()
            out[task][variant_name(gamma, family)] = float(correct)
    return out


def variant_name(gamma: int, family: str = "vit") -> str:
    return f"{family}/g{gamma}"
