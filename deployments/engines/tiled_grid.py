"""LLaVA-NeXT / LLaVA-OneVision's "anyres" tiling (json only, no torch): an image is fitted to
the best of the config's grid pinpoints, cut into tiles of the vision tower's input size, and
takes the base tile's tokens plus the tiles' patch grid with the padding cropped off, one
newline token per row; OneVision pools a grid of more than ~9 tiles' patches back down
("anyres_max_9"). Every count is vLLM 0.32's (`llava_next.py` / `llava_onevision.py`,
`get_num_image_tokens`), which transformers' processors agree with for one image."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TiledGrid:
    tile_size: int  # the vision tower's input side (pixels)
    patches_per_side: int  # tile_size // patch_size
    base_tokens: int  # one tile's tokens after the feature select strategy
    pinpoints: tuple[tuple[int, int], ...]  # (height, width) the image may be fitted to
    pool_over_nine_tiles: bool = False  # OneVision's anyres_max_9

    def best_fit(self, width: int, height: int) -> tuple[int, int]:
        """(height, width) of the pinpoint an image is fitted to (transformers'
        `select_best_resolution`: most of the image kept, least padding)."""
        best, kept_best, waste_best = self.pinpoints[0], 0, math.inf
        for ph, pw in self.pinpoints:
            scale = min(pw / width, ph / height)
            kept = min(int(width * scale) * int(height * scale), width * height)
            waste = pw * ph - kept
            if kept > kept_best or (kept == kept_best and waste < waste_best):
                best, kept_best, waste_best = (ph, pw), kept, waste
        return best

    def tokens_for(self, width: int, height: int) -> int:
        if min(width, height) < 1:
            raise ValueError(f"an image of {width}x{height} pixels has no area")
        ph, pw = self.best_fit(width, height)
        n = self.patches_per_side
        cur_h, cur_w = n * (ph // self.tile_size), n * (pw // self.tile_size)
        if width / height > cur_w / cur_h:
            new_h = int(round(height * (cur_w / width), 7))
            cur_h -= 2 * ((cur_h - new_h) // 2)
        else:
            new_w = int(round(width * (cur_h / height), 7))
            cur_w -= 2 * ((cur_w - new_w) // 2)
        return self._grid_tokens(cur_h, cur_w)

    def _grid_tokens(self, rows: int, cols: int) -> int:
        """Tokens of a cropped patch grid of rows x cols: its patches, a newline per row (after
        OneVision's pooling of a grid over ~9 tiles) and the base tile's."""
        unpadded, newlines = rows * cols, rows
        if self.pool_over_nine_tiles:
            n = self.patches_per_side
            ratio = math.sqrt(rows * cols / (9 * n * n))
            if ratio > 1.1:
                unpadded = int(rows // ratio) * int(cols // ratio)
                newlines = int(rows // ratio)
        return unpadded + newlines + self.base_tokens

    @property
    def most_tokens(self) -> int:
        """An upper bound of an image's tokens (the largest over every crop of every pinpoint's
        grid: with OneVision's pooling, the most is not at a pinpoint's own size)."""
        n, most = self.patches_per_side, 0
        for ph, pw in self.pinpoints:
            rows, cols = n * (ph // self.tile_size), n * (pw // self.tile_size)
            most = max(most, *(self._grid_tokens(r, cols) for r in range(1, rows + 1)),
                       *(self._grid_tokens(rows, c) for c in range(1, cols + 1)))
        return most


def tiled_grid(cfg: dict[str, Any], where: str) -> TiledGrid:
    """A LLaVA-NeXT / OneVision config's tiling (ValueError naming what is missing)."""
    vision = cfg.get("vision_config") or {}
    pins = cfg.get("image_grid_pinpoints")
    if not pins or "image_size" not in vision or "patch_size" not in vision:
        raise ValueError(f"{where}: not a LLaVA-NeXT config (needs image_grid_pinpoints and "
                         "vision_config.image_size / patch_size)")
    tile, patch = int(vision["image_size"]), int(vision["patch_size"])
    n = tile // patch
    with_cls = vision.get("model_type", "clip_vision_model") == "clip_vision_model"
    strategy = cfg.get("vision_feature_select_strategy", "default")
    if strategy not in ("default", "full"):
        raise ValueError(f"{where}: vision_feature_select_strategy {strategy!r}; supported: "
                         "default, full")
    base = n * n + (1 if with_cls else 0) - (1 if strategy == "default" else 0)
    pool = cfg.get("model_type") == "llava_onevision" and cfg.get(
        "vision_aspect_ratio", "anyres_max_9") == "anyres_max_9"
    return TiledGrid(tile, n, base, tuple((int(h), int(w)) for h, w in pins), pool)
