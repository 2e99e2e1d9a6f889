"""What a model directory's `config.json` (and, for dynamic-resolution models, its
`preprocessor_config.json`) says about serving it, one adapter per `model_type`, chosen
automatically (json only: the ingress, the builder and both engines read it):

- `llava` (LLaVA 1.5-style: a CLIP-like vision tower, a projector, a decoder-only LM): images as
  a fixed number of tokens each (`image_seq_length`, else (image_size / patch_size)^2), one
  placeholder token per image in the prompt that the engines expand; the encoder stage runs the
  vision tower and projector apart.
- `llava_next`, `llava_onevision` (the tiled "anyres" forms): an image is fitted to one of the
  config's grid pinpoints and takes a base tile's tokens plus its tiles' (cropped) patch grid
  with a newline token per row, so its tokens follow its size (`TiledGrid`,
  deployments/engines/tiled_grid.py); the encoder stage runs the vision tower, projector and
  packing apart and hands vLLM each image's [tokens, hidden].
- `qwen2_vl`, `qwen2_5_vl` (Qwen2-VL / Qwen2.5-VL: dynamic resolution): an image is resized to
  a multiple of patch_size x spatial_merge_size within the image processor's min/max pixels
  (`smart_resize`) and takes one token per merged patch, so its token count follows its size
  (`ImageGrid`); one `<|image_pad|>` per image in the prompt that the engines expand; the
  encoder stage runs the vision tower (`model.visual`) apart and hands vLLM `image_embeds` +
  `image_grid_thw`.
- text-only causal LMs (`llama`, `mistral`, `qwen2`, `qwen3`, `gemma`, `gemma2`, `phi3`,
  `granite`): no images (a request with one is a 400), no encoder stage.

Anything else is refused where the config is loaded, naming the supported types. The tokens
of an image are computed here once (`ModelFacts.tokens_for`) and reach the routers, the
autoscaler, `usage` and the engines from here."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deployments.engines.tiled_grid import TiledGrid, tiled_grid

VISION_LANGUAGE = ("llava", "llava_next", "llava_onevision", "qwen2_vl", "qwen2_5_vl")
TILED = ("llava_next", "llava_onevision")
DYNAMIC_RESOLUTION = ("qwen2_vl", "qwen2_5_vl")
TEXT_ONLY = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "granite")
SUPPORTED = (*VISION_LANGUAGE, *TEXT_ONLY)
MAX_ASPECT_RATIO = 200  # Qwen's image processor refuses longer/shorter images


@dataclass(frozen=True)
class ImageGrid:
    """Qwen-VL's dynamic resolution: an image is resized (`smart_resize`) to sides that are
    multiples of `patch_size * merge_size`, its area within [min_pixels, max_pixels], and takes
    one token per merge_size x merge_size patches."""

    patch_size: int
    merge_size: int
    min_pixels: int
    max_pixels: int

    @property
    def unit(self) -> int:
        return self.patch_size * self.merge_size

    def resized(self, width: int, height: int) -> tuple[int, int]:
        """(height, width) the image processor resizes a width x height image to (as
        transformers' `smart_resize`; ValueError: an aspect ratio over MAX_ASPECT_RATIO)."""
        if min(width, height) < 1:
            raise ValueError(f"an image of {width}x{height} pixels has no area")
        if max(width, height) / min(width, height) > MAX_ASPECT_RATIO:
            raise ValueError(f"an image of {width}x{height} pixels: the aspect ratio must be "
                             f"under {MAX_ASPECT_RATIO}")
        f = self.unit
        h, w = round(height / f) * f, round(width / f) * f
        if h * w > self.max_pixels:
            beta = math.sqrt(height * width / self.max_pixels)
            h = max(f, math.floor(height / beta / f) * f)
            w = max(f, math.floor(width / beta / f) * f)
        elif h * w < self.min_pixels:
            beta = math.sqrt(self.min_pixels / (height * width))
            h, w = math.ceil(height * beta / f) * f, math.ceil(width * beta / f) * f
        return h, w

    def tokens_for(self, width: int, height: int) -> int:
        h, w = self.resized(width, height)
        return (h // self.unit) * (w // self.unit)

    @property
    def most_tokens(self) -> int:
        return self.max_pixels // (self.unit * self.unit)


@dataclass(frozen=True)
class ModelFacts:
    model_type: str
    image_token_id: int | None  # None: the model takes no images
    # 0: no images; a fixed-size model's tokens per image; a dynamic one's most (max_pixels)
    tokens_per_image: int
    text_hidden: int
    max_position: int
    # dynamic resolution (Qwen-VL) or tiling (LLaVA-NeXT): tokens follow the image's size
    image_grid: ImageGrid | TiledGrid | None = None

    @property
    def takes_images(self) -> bool:
        return self.image_token_id is not None

    @property
    def adapter(self) -> str:
        if self.model_type in DYNAMIC_RESOLUTION:
            return "qwen_vl"
        if self.model_type in TILED:
            return "llava_tiled"
        return "llava" if self.model_type in VISION_LANGUAGE else "causal_lm"

    def tokens_for(self, width: int, height: int) -> int:
        """Image tokens of one width x height image (what every stage counts for it)."""
        if self.image_grid is None:
            return self.tokens_per_image
        return self.image_grid.tokens_for(width, height)


def model_facts(cfg: dict[str, Any], where: str = "config.json",
                preprocessor: dict[str, Any] | None = None) -> ModelFacts:
    """The adapter's facts of a parsed config.json (and preprocessor_config.json, which
    dynamic-resolution models read their pixel bounds from; ValueError: an unsupported model
    type, or a config its adapter cannot read, naming what is missing)."""
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED:
        raise ValueError(f"{where}: model_type {model_type!r} has no adapter; supported: "
                         f"{list(SUPPORTED)}")
    if model_type in TEXT_ONLY:
        return ModelFacts(model_type, None, 0, int(cfg["hidden_size"]),
                          int(cfg.get("max_position_embeddings", 2048)))
    if model_type in DYNAMIC_RESOLUTION:
        return _qwen_vl_facts(model_type, cfg, where, preprocessor or {})
    text = cfg.get("text_config") or {}
    vision = cfg.get("vision_config") or {}
    token_id = cfg.get("image_token_id", cfg.get("image_token_index"))
    if token_id is None or not text or not vision:
        raise ValueError(f"{where}: not a LLaVA-style config (needs image_token_id, "
                         "text_config and vision_config)")
    max_position = int(text.get("max_position_embeddings", 2048))
    if model_type in TILED:
        grid = tiled_grid(cfg, where)
        return ModelFacts(model_type, int(token_id), grid.most_tokens, int(text["hidden_size"]),
                          max_position, grid)
    per_image = cfg.get("image_seq_length") or (vision["image_size"] // vision["patch_size"]) ** 2
    return ModelFacts(model_type, int(token_id), int(per_image), int(text["hidden_size"]),
                      max_position)


def _qwen_vl_facts(model_type: str, cfg: dict[str, Any], where: str,
                   pre: dict[str, Any]) -> ModelFacts:
    """Qwen2-VL / Qwen2.5-VL: the text model's sizes at the top level (as the published
    checkpoints write them) or under `text_config` (as transformers 5 saves them)."""
    text = cfg.get("text_config") or cfg
    vision = cfg.get("vision_config") or {}
    token_id = cfg.get("image_token_id", text.get("image_token_id"))
    if token_id is None or not vision or "hidden_size" not in text:
        raise ValueError(f"{where}: not a Qwen-VL config (needs image_token_id, hidden_size "
                         "and vision_config)")
    size = pre.get("size") or {}
    grid = ImageGrid(
        patch_size=int(pre.get("patch_size") or vision.get("patch_size", 14)),
        merge_size=int(pre.get("merge_size") or vision.get("spatial_merge_size", 2)),
        min_pixels=int(pre.get("min_pixels") or size.get("shortest_edge") or 56 * 56),
        max_pixels=int(pre.get("max_pixels") or size.get("longest_edge") or 28 * 28 * 1280))
    if grid.min_pixels > grid.max_pixels or grid.max_pixels < grid.unit ** 2:
        raise ValueError(f"{where}: preprocessor min_pixels {grid.min_pixels} / max_pixels "
                         f"{grid.max_pixels} leave no image size (one token is "
                         f"{grid.unit}x{grid.unit} pixels)")
    return ModelFacts(model_type, int(token_id), grid.most_tokens, int(text["hidden_size"]),
                      int(text.get("max_position_embeddings", 32768)), grid)


def read_facts(model_dir: str | Path) -> ModelFacts:
    p = Path(model_dir) / "config.json"
    if not p.is_file():
        raise FileNotFoundError(f"{Path(model_dir)} is not a model directory (no config.json)")
    pre = Path(model_dir) / "preprocessor_config.json"
    return model_facts(json.loads(p.read_text()), str(p),
                       json.loads(pre.read_text()) if pre.is_file() else None)
