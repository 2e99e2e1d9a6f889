"""Model-selection ladder ("ladder"): timm architectures of increasing cost on cluttered digit
scenes (`scenes.py`), each reading the scene at its own input size.

The ladder has the shape of a production model zoo relative to this server (docs/models.md):
the dearest variant's batch-1 forward is several times the serving path's CPU per request,
the cheapest's a small fraction of the dearest's, and held-out accuracy rises with cost. Its
sizes were fixed by those rules from `python -m bench family-shapes` before any serving figure
was measured. The members are trained by our script (one recipe: AdamW, one-cycle, label
smoothing, fresh scenes every epoch) and served through the same code as a user's checkpoints
(`checkpoint/family.py`, `MemberClassifier`): one variant per member, each decoding the
request's image at its own size.

Wire format: {"image": base64 PNG (or any PIL-readable) greyscale image, any size (each variant
resizes it), bright ink on a dark background}; task "digits" (the digit at the scene's centre).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from deployments.models import training as T
from deployments.models.base import Example
from deployments.models.checkpoint.family import MemberClassifier
from deployments.models.checkpoint.loaders import ImageTransform, LoadedCheckpoint
from deployments.models.data import TASK_LABEL_NAMES
from deployments.models.input_decoding import check_task, encode_image
from deployments.models.scenes import SceneConfig, at_size, held_out, render

CODE_VERSION = 1
TASK = "digits"


@dataclass(frozen=True)
class Net:
    """One trained network: a timm architecture reading the scene at `side` px."""

    key: str
    architecture: str
    side: int


@dataclass(frozen=True)
class Member:
    """One rung (variant): its nets' softmax averaged (one net, or an ensemble of nets reading
    the scene at the same size)."""

    name: str
    side: int
    nets: tuple[str, ...]


NETS: tuple[Net, ...] = (
    Net("r10t_32", "resnet10t", 32),
    Net("r10t_64", "resnet10t", 64),
    Net("r10t_96", "resnet10t", 96),
    Net("r34d_96", "resnet34d", 96),
)
MEMBERS: tuple[Member, ...] = (
    Member("r10t-32", 32, ("r10t_32",)),
    Member("r10t-64", 64, ("r10t_64",)),
    Member("r10t-96", 96, ("r10t_96",)),
    Member("r10t+r34d-96", 96, ("r10t_96", "r34d_96")),
)


@dataclass(frozen=True)
class LadderConfig:
    scenes: SceneConfig = field(default_factory=SceneConfig)
    train_scenes: int = 3000   # fresh scenes per epoch
    epochs: int = 2
    batch_size: int = 16
    lr: float = 2e-3
    seed: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"code_version": CODE_VERSION, "nets": [asdict(n) for n in NETS],
                "members": [asdict(m) for m in MEMBERS], **asdict(self)}


class Averaged(nn.Module):
    """log of the nets' mean softmax (a softmax of it is the ensemble's probabilities)."""

    def __init__(self, nets: list[nn.Module]) -> None:
        super().__init__()
        self.nets = nn.ModuleList(nets)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if len(self.nets) == 1:
            return self.nets[0](x)
        probs = torch.stack([net(x).softmax(-1) for net in self.nets]).mean(0)
        return probs.clamp_min(1e-12).log()


class LadderNet(nn.Module):
    """Every trained net in one module (one safetensors file)."""

    def __init__(self) -> None:
        import timm

        super().__init__()
        self.nets = nn.ModuleDict({n.key: timm.create_model(
            n.architecture, pretrained=False, num_classes=10, in_chans=1) for n in NETS})

    def member(self, member: Member) -> nn.Module:
        return Averaged([self.nets[k] for k in member.nets])


def variant_name(member: Member) -> str:
    return f"ladder/{member.name}"


def build(cfg: LadderConfig) -> LadderNet:
    with T.deterministic(cfg.seed):
        return LadderNet()


def train(cfg: LadderConfig) -> tuple[LadderNet, dict[str, dict[str, float]]]:
    model = build(cfg)
    clock = T.Stopwatch("ladder")
    epochs = [render("train", cfg.scenes, cfg.train_scenes, seed=1 + e) for e in range(cfg.epochs)]
    steps = cfg.epochs * -(-cfg.train_scenes // cfg.batch_size)
    for i, spec in enumerate(NETS):
        net = model.nets[spec.key]
        with T.deterministic(cfg.seed + i):
            gen = torch.Generator().manual_seed(cfg.seed + i)
            opt, sched = T.optimizer(list(net.parameters()), cfg.lr, steps)
            net.train()
            for images, labels in epochs:
                x = at_size(images, spec.side)
                for idx in T.batches(len(labels), cfg.batch_size, gen):
                    T.step(F.cross_entropy(net(x[idx]), labels[idx], label_smoothing=0.1),
                           opt, sched)
            net.eval()
        clock.lap(spec.key)
    return model, evaluate(model, cfg, "test")


@torch.no_grad()
def evaluate(model: LadderNet, cfg: LadderConfig, split: str) -> dict[str, dict[str, float]]:
    images, labels = held_out(split, cfg.scenes)
    return {TASK: {variant_name(m): T.accuracy(model.member(m), at_size(images, m.side), labels)
                   for m in MEMBERS}}


class LadderServable(MemberClassifier):
    """A trained `LadderNet` served as a user's checkpoint family is; held-out scenes as
    examples."""

    def __init__(self, model: LadderNet, cfg: LadderConfig) -> None:
        members = {variant_name(m): LoadedCheckpoint(
            module=model.member(m).eval(), transform=ImageTransform(m.side, 1, (0.0,), (1.0,)),
            labels=TASK_LABEL_NAMES[TASK], num_classes=10) for m in MEMBERS}
        super().__init__("ladder", members, TASK_LABEL_NAMES[TASK], task=TASK)
        self.cfg = cfg

    def examples(self, split: str, task: str, limit: int | None = None) -> list[Example]:
        check_task(task, (TASK,))
        images, labels = held_out(split, self.cfg.scenes)
        n = len(labels) if limit is None else min(limit, len(labels))
        return [Example(inputs={"image": encode_image(images[i])}, label=int(labels[i]),
                        task=task) for i in range(n)]
