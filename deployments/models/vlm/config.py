"""The VLM's configuration: frozen dataclasses whose dict (with `CODE_VERSION`) keys the cache.

Sizes are chosen for the stage shape of a real vision-language model (docs/vlm.md): 56 px
images in 14 px patches give 16 image tokens per image (each patch covers 2x2 pixels of the
8x8 source digit), and the vision tower is wider than the decoder, so that encoding the images
of a multi-image request is a large share of its time to first token.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

CODE_VERSION = 1
"""Bump when the training code or the model directory layout changes (invalidates the cache)."""


@dataclass(frozen=True)
class VisionSpec:
    """CLIP vision tower."""

    hidden_size: int = 192
    intermediate_size: int = 768
    num_layers: int = 4
    num_heads: int = 3
    image_size_px: int = 56
    patch_size_px: int = 14

    @property
    def tokens_per_image(self) -> int:
        """Image tokens the decoder sees per image (patches; the class token is dropped)."""
        return (self.image_size_px // self.patch_size_px) ** 2


@dataclass(frozen=True)
class TextSpec:
    """Llama decoder (head_dim 64: vLLM's CPU attention rejects smaller heads)."""

    hidden_size: int = 128
    intermediate_size: int = 512
    num_layers: int = 2
    num_heads: int = 2
    head_dim: int = 64
    max_model_len: int = 256


@dataclass(frozen=True)
class DataSpec:
    """The tasks made from scikit-learn's digits."""

    seed: int = 0
    test_frac: float = 0.2
    max_images: int = 8
    max_number: int = 20
    arithmetic_test_frac: float = 0.2
    multi_test_requests: int = 200
    augment_rotate_deg: float = 8.0
    augment_scale: tuple[float, float] = (0.95, 1.05)
    augment_shift_px: float = 3.0


@dataclass(frozen=True)
class TrainSpec:
    """Number-word embeddings start on a number line (`number_init`: sinusoids of the value in
    their first dimensions, the stand-in for a pretrained language model's sense that number
    words are ordered; without it held-out arithmetic facts generalise only after thousands of
    steps). Two stages. (A) The vision tower is pretrained as a digit classifier (a linear head
    on its mean patch feature, discarded afterwards: the stand-in for CLIP's pretraining).
    (B) The tower is frozen, its features cached for a clean and `feature_views - 1`
    augmented views of every training image, and projector + decoder learn all three tasks:
    arithmetic every step (cheap; held-out facts need many steps and strong weight decay to
    generalise), the image tasks every `image_every`-th step."""

    seed: int = 0
    number_init: float = 1.0
    tower_epochs: int = 12
    tower_batch: int = 32
    tower_lr: float = 1e-3
    tower_weight_decay: float = 0.05
    feature_views: int = 3
    decoder_steps: int = 2400
    image_every: int = 2
    sequence_batch: int = 16
    digit_batch: int = 8
    arithmetic_batch: int = 32
    decoder_lr: float = 3e-3
    decoder_weight_decay: float = 1.0


@dataclass(frozen=True)
class VlmConfig:
    """Everything that decides the trained model directory."""

    vision: VisionSpec = field(default_factory=VisionSpec)
    text: TextSpec = field(default_factory=TextSpec)
    data: DataSpec = field(default_factory=DataSpec)
    train: TrainSpec = field(default_factory=TrainSpec)
    code_version: int = CODE_VERSION

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def config_hash(self) -> str:
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


TINY_VLM = VlmConfig(
    vision=VisionSpec(hidden_size=64, intermediate_size=128, num_layers=1, num_heads=1),
    text=TextSpec(hidden_size=64, intermediate_size=128, num_layers=1, num_heads=1),
    data=DataSpec(multi_test_requests=8),
    train=TrainSpec(tower_epochs=1, decoder_steps=150, feature_views=2))
"""The tiny VLM: the shipped layout (16 tokens per image, head_dim 64, a 256-token context, at
most 8 images) with one narrow layer per tower. 150 decoder steps (~10 s on one thread) make it
answer a few tokens then stop, with greedy margins wide enough that vLLM and transformers agree
on its tokens; its answers are not right (accuracy is the trained VLM's tests' business). The
tests and the adapter benchmark serve it."""
