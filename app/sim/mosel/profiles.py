"""Synthetic profiles for the MOSEL experiment, built as `policies.profile.Profile` objects.

TVLT-like (two modalities): section 3 and Figure 1 say audio-only TVLT is ~11x faster than
audio+video with a few points less accuracy, and that video costs most of the latency while
adding little accuracy. The numbers below encode exactly that (no measured TVLT profile is
available here); a measured profile JSON replaces them with `--profile path.json`.

Three-modality (TBN-like, late fusion): each modality has its own encoder cost and the
fusion head a small fixed cost; accuracies follow Appendix E's description of TBN (image
weakest, video strongest, all three best).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from policies.profile import LatencyModel, LatencyPoint, Profile, VariantProfile
from policies.types import Variant

MAX_BATCH_SIZE = 64


def _linear_points(fixed_ms: float, per_request_ms: float,
                   max_batch_size: int = MAX_BATCH_SIZE) -> tuple[LatencyPoint, ...]:
    """A dense latency table fixed + per_request * b (deterministic: all percentiles equal)."""
    out = []
    for b in range(1, max_batch_size + 1):
        ms = fixed_ms + per_request_ms * b
        out.append(LatencyPoint(b, ms, ms, ms, ms, 0))
    return tuple(out)


def _variant(model: str, modalities: tuple[str, ...], accuracy: float, fixed_ms: float,
             per_request_ms: float) -> VariantProfile:
    name = "+".join(modalities)
    return VariantProfile(Variant(name=name, model=model, modalities=frozenset(modalities)),
                          accuracy, _linear_points(fixed_ms, per_request_ms))


def tvlt_like_profile() -> Profile:
    """audio ~11x faster than audio+video, 3 points less accurate; video slow and weak."""
    model = "tvlt-like"
    variants = (
        _variant(model, ("audio",), 0.77, 2.0, 2.7),
        _variant(model, ("video",), 0.72, 14.0, 27.0),
        _variant(model, ("audio", "video"), 0.80, 16.0, 30.0),
    )
    return Profile("tvlt-like", "synthetic", variants,
                   {"source": "synthetic from MOSEL section 3 / Figure 1 ratios"})


def three_modality_profile() -> Profile:
    """Late fusion: latency = fusion fixed cost + sum of per-modality encoder costs."""
    model = "tbn-like"
    cost_ms = {"audio": 6.0, "video": 12.0, "image": 4.0}
    fixed_ms = {"audio": 1.5, "video": 3.0, "image": 1.0}
    accuracy = {("audio",): 0.55, ("video",): 0.62, ("image",): 0.45,
                ("audio", "video"): 0.68, ("audio", "image"): 0.60,
                ("image", "video"): 0.64, ("audio", "image", "video"): 0.70}
    variants = tuple(
        _variant(model, combo, acc, 2.0 + sum(fixed_ms[m] for m in combo),
                 sum(cost_ms[m] for m in combo))
        for combo, acc in accuracy.items()
    )
    return Profile("three-modality", "synthetic", variants,
                   {"source": "synthetic late-fusion profile (TBN-like)"})


def figure2_profile() -> Profile:
    """Figure 2's per-request numbers: audio 20 @0.67, video 30 @0.70, both 60 @0.80; batch
    latency = batch size x per-request latency (time units read as seconds)."""
    model = "figure2"
    def pts(unit: float) -> tuple[LatencyPoint, ...]:
        return tuple(LatencyPoint(b, unit * b * 1000, unit * b * 1000, unit * b * 1000,
                                  unit * b * 1000) for b in range(1, 9))
    variants = (
        VariantProfile(Variant("audio", model, frozenset({"audio"})), 0.67, pts(20.0)),
        VariantProfile(Variant("video", model, frozenset({"video"})), 0.70, pts(30.0)),
        VariantProfile(Variant("audio+video", model, frozenset({"audio", "video"})), 0.80,
                       pts(60.0)),
    )
    return Profile("figure2", "paper", variants, {"source": "MOSEL Figure 2"})


_BUILTIN = {"tvlt-like": tvlt_like_profile, "three-modality": three_modality_profile,
            "figure2": figure2_profile}


def builtin_profile_names() -> list[str]:
    return sorted(_BUILTIN)


def load_profile(name_or_path: str) -> Profile:
    """A built-in profile by name, or a measured profile JSON (policies.profile format)."""
    if name_or_path in _BUILTIN:
        return _BUILTIN[name_or_path]()
    path = Path(name_or_path)
    if path.suffix == ".json" and path.exists():
        return Profile.from_dict(json.loads(path.read_text()))
    raise ValueError(f"unknown profile {name_or_path!r}; valid: {builtin_profile_names()} "
                     "or a path to a profile .json")


def all_modality_index(profile: Profile) -> int:
    """The variant using the most modalities (ties: the most accurate): the 'none' policy's."""
    return max(range(len(profile.variants)),
               key=lambda i: (len(profile.variants[i].variant.modalities),
                              profile.variants[i].accuracy))


@dataclass(frozen=True)
class MoselProfile:
    """What MOSEL reads from a profile: one variant per modality combination (its accuracy and
    dense batch latency table, `model`), the combinations, and the all-modality variant."""

    name: str
    model: LatencyModel
    combinations: tuple[frozenset[str], ...]
    all_modality_index: int


def mosel_profile_from_profile(profile: Profile, percentile: str = "mean",
                               max_batch_size: int | None = None) -> MoselProfile:
    """Map a (measured) `Profile` onto MOSEL (docs/mosel.md): each variant is the model run on
    the modality set `Variant.modalities`; all variants belong to one model; every set is
    non-empty and appears once; the union of all sets must itself be a variant (the
    modality-agnostic baseline's). Latency is the `percentile` table, dense over batch sizes."""
    if not profile.variants:
        raise ValueError(f"profile {profile.name}: no variants")
    models = sorted({v.variant.model for v in profile.variants})
    if len(models) > 1:
        raise ValueError(f"profile {profile.name}: variants of several models {models}; "
                         "MOSEL selects modalities of one model (use Profile.subset)")
    combos = tuple(frozenset(v.variant.modalities) for v in profile.variants)
    if any(not c for c in combos):
        empty = [v.variant.name for v in profile.variants if not v.variant.modalities]
        raise ValueError(f"profile {profile.name}: variants without modalities: {empty}")
    if len(set(combos)) != len(combos):
        raise ValueError(f"profile {profile.name}: a modality set appears twice")
    union = frozenset().union(*combos)
    if union not in combos:
        raise ValueError(f"profile {profile.name}: no variant uses all modalities {sorted(union)}")
    model = LatencyModel.from_profile(profile, percentile, max_batch_size)
    return MoselProfile(profile.name, model, combos, combos.index(union))
