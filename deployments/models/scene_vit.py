"""Token-adaptive ViT on cluttered digit scenes ("sceneVit", builtin `scenevit`): OTAS's knob on a
model whose cost the knob moves (docs/models.md).

Architecture: a hybrid ViT (as ViT-Hybrid / R50+ViT): a convolutional trunk reads the 96x96 scene
(`scenes.py`, the ladder's task) and hands its stride-8 feature map, 12x12 = 144 tokens, through a
1x1 projection to a timm `VisionTransformer` (class token, learned positions; `depth` blocks).
The trunk is the trained ladder's resnet10t at 96 px (`ladder.py`, net "r10t_96") up to its
second stage, frozen: the family is trained on top of the ladder's weights (its `base`, trained
first; its config is part of this one's hash). The transformer trains on the trunk's cached
features with a random `keep_tokens` of the 144 tokens per step (as FLIP drops tokens: ~4x
cheaper steps, and a model that tolerates fewer tokens). Gamma works as in `vit_tokens.py`:
gamma < 0 merges |gamma| tokens per block with ToMe (at most half per block). Gamma > 0 (OTAS's prompts, VPT-deep) is
supported by the code but not shipped: tuned on the frozen transformer within the training budget
(40 steps) prompts cost 11-30% more and lost 10-16 points (g16 0.758, g48 0.695 vs g0 0.857),
so they would only be dominated variants (docs/records/family_shapes/README.md).

Sizes were fixed before any serving figure (`python -m bench family-shapes`): gamma 0's batch-1
forward ~3x the serving path's CPU per request (the model, not the path, is what load exhausts),
the most-merged setting as cheap as ToMe's half-per-block cap allows.

Wire format: {"image": base64 PNG (or any PIL-readable) greyscale image, any size (resized to
96x96), bright ink on a dark background}; task "digits" (the digit at the scene's centre).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import timm
import torch
import torch.nn.functional as F
from timm.layers import PatchEmbed
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from deployments.models import ladder
from deployments.models import training as T
from deployments.models.base import Example
from deployments.models.data import TASK_CLASSES
from deployments.models.input_decoding import check_fields, check_task, decode_image, encode_image
from deployments.models.scenes import SceneConfig, at_size, held_out, render
from deployments.models.vit_tokens import TokenViT, TokenViTServable

CODE_VERSION = 1
TASK = "digits"
TRUNK_CHANNELS = 128  # resnet10t's second stage
TRUNK_STRIDE = 8
_TRUNK = "backbone.patch_embed.proj.0."  # the frozen trunk's parameters


@dataclass(frozen=True)
class SceneVitConfig:
    scenes: SceneConfig = field(default_factory=SceneConfig)
    side: int = 96
    embed_dim: int = 384
    depth: int = 6
    heads: int = 6
    mlp_ratio: float = 4.0
    gammas: tuple[int, ...] = (-72, -48, -24, -8, 0)  # merges only (prompts: module doc)
    trunk_net: str = "r10t_96"  # the ladder's net whose first two stages are the trunk
    train_scenes: int = 3000    # scenes whose trunk features the transformer trains on
    steps: int = 200            # transformer steps on the cached trunk features
    keep_tokens: int = 36       # of the 144 per training step
    batch_size: int = 32
    lr: float = 5e-4  # 1e-3 trained to 0.85 on one ladder's trunk, 0.49 on another's
    seed: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"code_version": CODE_VERSION, **asdict(self),
                "trunk_of": ladder.LadderConfig().to_dict()}


def _trunk() -> nn.Sequential:
    r = timm.create_model("resnet10t", pretrained=False, num_classes=10, in_chans=1)
    return nn.Sequential(r.conv1, r.bn1, r.act1, r.maxpool, r.layer1, r.layer2)


class TrunkEmbed(PatchEmbed):
    """timm PatchEmbed whose projection is the conv trunk and a 1x1 conv to the embedding."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.proj = nn.Sequential(_trunk(), nn.Conv2d(TRUNK_CHANNELS, kwargs["embed_dim"], 1))


class SceneViT(TokenViT):
    """`TokenViT` (its prompts, heads and gamma forward) over the trunk-embedded scene."""

    def __init__(self, cfg: SceneVitConfig) -> None:  # noqa: D107 (TokenViT's own init skipped)
        nn.Module.__init__(self)
        self.cfg = cfg  # type: ignore[assignment]
        self.backbone = VisionTransformer(
            img_size=cfg.side, patch_size=TRUNK_STRIDE, in_chans=1, num_classes=0,
            embed_dim=cfg.embed_dim, depth=cfg.depth, num_heads=cfg.heads,
            mlp_ratio=cfg.mlp_ratio, embed_layer=TrunkEmbed, global_pool="token")
        T.reset_linear_init(self.backbone)
        d, n_prompts = cfg.embed_dim, max(0, *cfg.gammas)
        self.prompts = nn.ParameterDict({TASK: nn.Parameter(0.02 * torch.randn(cfg.depth,
                                                                                n_prompts, d))})
        self.heads = nn.ModuleDict({self.head_key(TASK, g): nn.Linear(d, TASK_CLASSES[TASK])
                                    for g in sorted({0, *(g for g in cfg.gammas if g > 0)})})

    @property
    def trunk(self) -> nn.Sequential:
        return self.backbone.patch_embed.proj[0]

    def tokens_from_trunk(self, maps: torch.Tensor) -> torch.Tensor:
        """Trunk feature maps [B, C, 12, 12] -> embedded tokens (class token first)."""
        vit = self.backbone
        x = vit.patch_embed.proj[1](maps).flatten(2).transpose(1, 2)
        return vit.norm_pre(vit._pos_embed(vit.patch_embed.norm(x)))


def build(cfg: SceneVitConfig) -> SceneViT:
    with T.deterministic(cfg.seed):
        return SceneViT(cfg)


def _load_trunk(model: SceneViT, cfg: SceneVitConfig, ladder_state: dict[str, Any]) -> None:
    """The ladder net's stem and first two stages (conv1, bn1, layer1, layer2) into the trunk,
    frozen."""
    prefix = f"nets.{cfg.trunk_net}."
    names = {"conv1": "0", "bn1": "1", "layer1": "4", "layer2": "5"}
    state = {f"{names[k.split('.')[0]]}.{k.split('.', 1)[1]}": v
             for k, v in ((k[len(prefix):], v) for k, v in ladder_state.items()
                          if k.startswith(prefix)) if k.split(".")[0] in names}
    model.trunk.load_state_dict(state, strict=True)
    model.trunk.eval().requires_grad_(False)


@torch.no_grad()
def _trunk_maps(model: SceneViT, cfg: SceneVitConfig, seed: int
                ) -> tuple[torch.Tensor, torch.Tensor]:
    images, labels = render("train", cfg.scenes, cfg.train_scenes, seed=seed)
    x = at_size(images, cfg.side)
    return torch.cat([model.trunk(x[i:i + 256]) for i in range(0, len(x), 256)]), labels


def _dropped(tokens: torch.Tensor, keep: int, gen: torch.Generator) -> torch.Tensor:
    """The class token and a random `keep` of the patch tokens (the same for the batch)."""
    kept = torch.randperm(tokens.shape[1] - 1, generator=gen)[:keep] + 1
    return torch.cat([tokens[:, :1], tokens[:, kept]], dim=1)


def _train_transformer(model: SceneViT, cfg: SceneVitConfig, maps: torch.Tensor,
                       labels: torch.Tensor, gen: torch.Generator) -> None:
    head = model.heads[model.head_key(TASK, 0)]
    params = [p for n, p in model.backbone.named_parameters()
              if not n.startswith(_TRUNK.removeprefix("backbone."))] + list(head.parameters())
    opt, sched = T.optimizer(params, cfg.lr, cfg.steps)
    model.backbone.train()
    model.trunk.eval()
    done = 0
    while done < cfg.steps:
        for idx in T.batches(len(labels), cfg.batch_size, gen):
            tokens = _dropped(model.tokens_from_trunk(maps[idx]), cfg.keep_tokens, gen)
            feats, _ = model.through_blocks(tokens, TASK, 0)
            T.step(F.cross_entropy(head(feats), labels[idx], label_smoothing=0.1), opt, sched)
            done += 1
            if done == cfg.steps:
                break
    model.eval()


def train(cfg: SceneVitConfig, ladder_state: dict[str, Any]
          ) -> tuple[SceneViT, dict[str, dict[str, float]]]:
    """The ladder's trunk, then the transformer on its cached features; returns the model and
    held-out test accuracy per variant."""
    model = build(cfg)
    clock = T.Stopwatch("scenevit")
    with T.deterministic(cfg.seed):
        _load_trunk(model, cfg, ladder_state)
        maps, labels = _trunk_maps(model, cfg, seed=100)
        gen = torch.Generator().manual_seed(cfg.seed + 1)
        _train_transformer(model, cfg, maps, labels, gen)
        clock.lap("transformer")
    model.eval()
    return model, evaluate(model, cfg, "test")


@torch.no_grad()
def evaluate(model: SceneViT, cfg: SceneVitConfig, split: str) -> dict[str, dict[str, float]]:
    """Held-out accuracy per variant (the trunk's maps computed once: what `model(x, task,
    gamma)` computes, tested equal)."""
    images, labels = held_out(split, cfg.scenes)
    x = at_size(images, cfg.side)
    maps = torch.cat([model.trunk(x[i:i + 256]) for i in range(0, len(x), 256)])

    def logits(m: torch.Tensor, gamma: int) -> torch.Tensor:
        feats, _ = model.through_blocks(model.tokens_from_trunk(m), TASK, gamma)
        return model.heads[model.head_key(TASK, gamma)](feats)

    return {TASK: {variant_name(g): T.accuracy(lambda m, g=g: logits(m, g), maps, labels)
                   for g in cfg.gammas}}


def variant_name(gamma: int) -> str:
    return f"scenevit/g{gamma}"


class SceneViTServable(TokenViTServable):
    """`TokenViTServable` over a trained `SceneViT`: one task, 96 px scenes, held-out scenes as
    examples; variants "scenevit/g<gamma>"."""

    name = "scenevit"

    def __init__(self, model: SceneViT, cfg: SceneVitConfig | None = None) -> None:
        super().__init__(model)

    def tasks(self) -> tuple[str, ...]:
        return (TASK,)

    def decode(self, inputs: dict[str, Any], task: str) -> dict[str, torch.Tensor]:
        check_task(task, self.tasks())
        fields = check_fields(inputs, required=("image",), allowed=("image",))
        side = self.cfg.side
        return {"image": decode_image(fields["image"], "image", side, side)}

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        check_task(task, self.tasks())
        images, labels = held_out(split, self.cfg.scenes)
        n = len(labels) if limit is None else min(limit, len(labels))
        return [Example(inputs={"image": encode_image(images[i])}, label=int(labels[i]),
                        task=task) for i in range(n)]
