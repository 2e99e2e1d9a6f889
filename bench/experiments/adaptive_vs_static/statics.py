"""The static configurations the live bench compares an adaptive policy with (pure).

A static configuration runs one variant always, whatever the load:

- `most_accurate` (the default, the live benchmark's baseline): the family's most accurate variant;
- `all`: every such configuration of the family that meets the accuracy floor (`min_accuracy`,
  MOSEL's accuracy SLO; a variant below it can never meet it): for OTAS every fixed gamma
  (`fixed_gamma`: OTAS's own batching and eviction at one gamma, the paper's baseline); for
  MOSEL always-all-modalities (`all_modalities`: MOSEL's machinery with its `none` policy, the
  paper's baseline) and every modality subset (`fixed`); otherwise every variant (`fixed`);
- a comma-separated list of labels from `all` (e.g. `g-16,g0,g8`).

The best static configuration is the one with the highest live capacity (`best_static`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies.profile import Profile, VariantProfile

MOST_ACCURATE = "most_accurate"
ALL = "all"
ALL_MODALITIES = "all_modalities"
ACCURACY_EPS = 1e-9


@dataclass(frozen=True)
class StaticConfig:
    label: str  # names its runs (ramp_<label>_<i>, static_<label>_2x)
    policy: str  # a scheduler of policies.schedulers.registry
    params: tuple[tuple[str, Any], ...] = ()  # its policy_params
    variant: str = ""  # the variant it runs (the profile capacity estimate's)
    accuracy: float = 0.0  # that variant's profiled accuracy

    def classifier_changes(self) -> dict[str, Any]:
        """The classifier settings that deploy it."""
        return {"policy": self.policy, "policy_params": dict(self.params)}

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "policy": self.policy, "params": dict(self.params),
                "variant": self.variant, "accuracy": self.accuracy}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StaticConfig:
        return cls(d["label"], d["policy"], tuple(sorted((d.get("params") or {}).items())),
                   d.get("variant", ""), float(d.get("accuracy", 0.0)))


def most_accurate_static(profile: Profile) -> StaticConfig:
    vp = max(profile.variants, key=lambda v: v.accuracy)  # the first of equals, as the policy
    return StaticConfig(MOST_ACCURATE, "most_accurate", (), vp.variant.name, vp.accuracy)


def all_modalities_variant(profile: Profile) -> VariantProfile | None:
    """The variant running every modality any variant uses (None: no such variant)."""
    union = frozenset[str]().union(*(v.variant.modalities for v in profile.variants))
    return next((v for v in profile.variants if v.variant.modalities == union), None)


def _fixed_gammas(profile: Profile) -> list[StaticConfig]:
    out: dict[int, StaticConfig] = {}
    for vp in profile.variants:  # one per gamma (a profile of several task models repeats it)
        g = vp.variant.gamma
        out.setdefault(g, StaticConfig(f"g{g}", "fixed_gamma", (("gamma", g),),
                                       vp.variant.name, vp.accuracy))
    return list(out.values())


def static_candidates(profile: Profile, adaptive: str,
                      min_accuracy: float | None = None) -> list[StaticConfig]:
    """Every static configuration of the family for the adaptive policy `adaptive` (see module
    doc), most accurate first, those below the accuracy floor left out."""
    if adaptive == "otas":
        found = _fixed_gammas(profile)
    else:
        found = [StaticConfig(vp.variant.name.split("/", 1)[-1], "fixed",
                              (("variant", vp.variant.name),), vp.variant.name, vp.accuracy)
                 for vp in profile.variants]
    every = all_modalities_variant(profile) if adaptive == "mosel" else None
    if every is not None:
        found.append(StaticConfig(ALL_MODALITIES, ALL_MODALITIES, (), every.variant.name,
                                  every.accuracy))
    floor = -1.0 if min_accuracy is None else min_accuracy - ACCURACY_EPS
    return sorted((s for s in found if s.accuracy >= floor), key=lambda s: -s.accuracy)


def resolve_statics(spec: str, profile: Profile, adaptive: str,
                    min_accuracy: float | None = None) -> list[StaticConfig]:
    """The static configurations `spec` names (see module doc); an unknown label or an empty
    choice is an error naming the valid ones."""
    if spec == MOST_ACCURATE:
        return [most_accurate_static(profile)]
    candidates = static_candidates(profile, adaptive, min_accuracy)
    if not candidates:
        raise ValueError(f"no static configuration of {profile.name!r} meets the accuracy "
                         f"floor {min_accuracy}")
    if spec == ALL:
        return candidates
    by_label = {s.label: s for s in candidates}
    labels = [x.strip() for x in spec.split(",") if x.strip()]
    unknown = [x for x in labels if x not in by_label]
    if unknown or not labels:
        raise ValueError(f"unknown static configurations {unknown or spec!r}; valid: "
                         f"{[MOST_ACCURATE, ALL, *by_label]}")
    return [by_label[x] for x in dict.fromkeys(labels)]


def best_static(capacity_qps: Mapping[str, float]) -> str:
    """The label with the highest live capacity (the first of equals, in the given order)."""
    if not capacity_qps:
        raise ValueError("no static configuration measured")
    return max(capacity_qps, key=lambda label: capacity_qps[label])


def run_names(static: StaticConfig, best: str, several: bool) -> tuple[str, str]:
    """(ramp step prefix, 2x run name): the best one's 2x run is `static_2x` (what the checks
    and the simulator's fidelity read); with one static, its ramp steps are `ramp_<i>`."""
    ramp = f"ramp_{static.label}" if several else "ramp"
    return ramp, "static_2x" if static.label == best else f"static_{static.label}_2x"
