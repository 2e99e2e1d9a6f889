"""Plan files built from profile files: `.cache/plans/<profile-name>.<kind>.json`.

`<kind>` is the scheduler that loads the plan (`policies.schedulers.registry`): "ramsis",
"jellyfish", "mosel", "otas". The builders are `policies.schedulers.plans`; this module picks the
kinds a profile supports, fills in deployment settings and caches the result. A plan file carries
`source` (the profile file's hash, the settings and the kind): it is rebuilt when any differ.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from policies.model_selection.mdp_spec import Reward
from policies.profile import LatencyModel, Profile
from policies.schedulers import plans as builders

log = logging.getLogger(__name__)

DEFAULT_PLANS_DIR = Path(".cache/plans")
KINDS = ("ramsis", "jellyfish", "mosel", "otas")


@dataclass(frozen=True)
class PlanSettings:
    """Deployment settings the plans are computed for (defaults match `app.config`)."""

    slo_s: float = 0.2
    num_workers: int = 1
    percentile: str = "p95"
    max_batch_size: int | None = 8
    min_qps: float | None = None  # None: 1 QPS (light load -> the most accurate policy)
    max_qps: float | None = None  # None: capacity of the fastest variant at max batch size
    intervals: int = 100
    num_loads: int = 20  # Jellyfish+ anticipated loads
    mosel_max_job_size: int = 64
    ramsis_max_queue: int | None = None  # None: the max batch size (the paper's model)
    ramsis_reward: str = "per_decision"  # or "per_query"
    ramsis_job_size: int = 1  # items per call the policy expects (jobs share a deadline)

    def __post_init__(self) -> None:
        if self.slo_s <= 0 or self.num_workers < 1:
            raise ValueError(f"bad plan settings: {self}")


def plan_kinds(profile: Profile) -> list[str]:
    """Token variants (several gammas) -> OTAS; modality subsets -> MOSEL; otherwise model
    selection -> RAMSIS and Jellyfish+."""
    if len({v.variant.gamma for v in profile.variants}) > 1:
        return ["otas"]
    if len({v.variant.modalities for v in profile.variants}) > 1:
        return ["mosel"]
    return ["ramsis", "jellyfish"]


def load_range(profile: Profile, settings: PlanSettings) -> tuple[float, float]:
    """The deployment loads (QPS) to plan for; by default from 1 QPS (so light live loads get a
    light-load policy, not one planned for thousands of QPS) up to the fastest variant's capacity
    at the largest batch over all workers."""
    model = LatencyModel.from_profile(profile, settings.percentile, settings.max_batch_size)
    b = model.max_batch_size
    capacity = settings.num_workers * b / model.latency(model.fastest(), b)
    hi = settings.max_qps if settings.max_qps is not None else round(capacity, 1)
    lo = settings.min_qps if settings.min_qps is not None else min(1.0, hi)
    if not 0 < lo <= hi:
        raise ValueError(f"bad load range [{lo}, {hi}]")
    return lo, hi


def build_plan(kind: str, profile: Profile, settings: PlanSettings) -> dict[str, Any]:
    """One plan of `kind` for `profile` (RAMSIS solves MDPs: seconds to minutes)."""
    s = settings
    if kind == "ramsis":
        lo, hi = load_range(profile, s)
        return builders.build_ramsis_plan(profile, s.slo_s, s.num_workers, lo, hi,
                                          percentile=s.percentile,
                                          max_batch_size=s.max_batch_size, intervals=s.intervals,
                                          max_queue=s.ramsis_max_queue,
                                          reward=Reward(s.ramsis_reward),
                                          job_size=s.ramsis_job_size)
    if kind == "jellyfish":
        lo, hi = load_range(profile, s)
        n = max(s.num_loads, 2)
        loads = [round(lo + (hi - lo) * i / (n - 1), 3) for i in range(n)]
        return builders.build_jellyfish_plan(profile, s.slo_s, s.num_workers, loads,
                                             s.percentile, s.max_batch_size)
    if kind == "mosel":
        return builders.build_mosel_plan(profile, s.mosel_max_job_size,
                                         max_batch_size=s.max_batch_size)
    if kind == "otas":
        return builders.build_otas_plan(profile, percentile=s.percentile,
                                        max_batch_size=s.max_batch_size)
    raise ValueError(f"unknown plan kind {kind!r}; valid: {list(KINDS)}")


def plan_path(plans_dir: Path, profile_name: str, kind: str) -> Path:
    return Path(plans_dir) / f"{profile_name}.{kind}.json"


def _source(profile_text: str, kind: str, settings: PlanSettings) -> dict[str, Any]:
    return {"kind": kind, "profile_sha256": hashlib.sha256(profile_text.encode()).hexdigest()[:24],
            "settings": asdict(settings), "plans_format_version": builders.FORMAT_VERSION}


def _current(path: Path, source: dict[str, Any]) -> bool:
    try:
        return bool(json.loads(path.read_text()).get("source") == source)
    except (OSError, ValueError):
        return False


def ensure_plans(profile_paths: Mapping[str, Path], plans_dir: Path = DEFAULT_PLANS_DIR,
                 settings: PlanSettings | None = None, kinds: Sequence[str] | None = None,
                 force: bool = False) -> dict[str, Path]:
    """Plans for every profile (the kinds `plan_kinds` picks, or those of `kinds` it supports),
    rebuilt only when missing or built from another profile or settings. Returns
    `<profile>.<kind>` -> path."""
    settings = settings or PlanSettings()
    unknown = [k for k in kinds or () if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown plan kinds {unknown}; valid: {list(KINDS)}")
    out: dict[str, Path] = {}
    for name, ppath in profile_paths.items():
        text = Path(ppath).read_text()
        profile = Profile.from_dict(json.loads(text))
        supported = plan_kinds(profile)
        wanted = [k for k in supported if kinds is None or k in kinds]
        if kinds is not None and not wanted:
            log.warning("profile %s supports plan kinds %s, none of %s", name, supported,
                        list(kinds))
        for kind in wanted:
            path = plan_path(plans_dir, name, kind)
            source = _source(text, kind, settings)
            if not force and _current(path, source):
                log.info("plan %s.%s is current: %s", name, kind, path)
            else:
                started = time.perf_counter()
                plan = build_plan(kind, profile, settings)
                plan["source"] = source
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".json.tmp")
                tmp.write_text(json.dumps(plan))
                tmp.replace(path)
                log.info("plan %s.%s built in %.1f s: %s", name, kind,
                         time.perf_counter() - started, path)
            out[f"{name}.{kind}"] = path
    return out
