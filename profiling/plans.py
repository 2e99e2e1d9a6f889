"""Plan files built from profile files: `<plans_dir>/<profile-name>.<kind>.json`.

`<kind>` is a `PlanKind` (the registry `policies.schedulers.registry` says which scheduler reads
which). The builders are `policies.schedulers.plans`; this module picks the kinds a profile
supports, fills in deployment settings and caches the result. A plan file is the plan's JSON
plus `source` (the profile file's hash, the settings and the kind): it is rebuilt when any
differ, or when the file no longer reads as a plan of its kind.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from policies.model_selection.mdp_spec import Reward
from policies.profile import LatencyModel, Profile
from policies.schedulers import plans as builders
from policies.schedulers.plan_types import FORMAT_VERSION, Plan, PlanKind
from profiling.paths import DEFAULT_PLANS_DIR, plan_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PlanSettings:
    """Deployment settings the plans are computed for (defaults match `ClassifierConfig`)."""

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


def plan_kinds(profile: Profile) -> list[PlanKind]:
    """Token variants (several gammas) -> OTAS; modality subsets -> MOSEL; otherwise model
    selection -> RAMSIS and Jellyfish+."""
    if len({v.variant.gamma for v in profile.variants}) > 1:
        return [PlanKind.OTAS]
    if len({v.variant.modalities for v in profile.variants}) > 1:
        return [PlanKind.MOSEL]
    return [PlanKind.RAMSIS, PlanKind.JELLYFISH]


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


def _ramsis(profile: Profile, s: PlanSettings) -> Plan:
    lo, hi = load_range(profile, s)
    return builders.build_ramsis_plan(profile, builders.RamsisPlanSettings(
        s.slo_s, s.num_workers, lo, hi, percentile=s.percentile, max_batch_size=s.max_batch_size,
        intervals=s.intervals, max_queue=s.ramsis_max_queue, reward=Reward(s.ramsis_reward),
        job_size=s.ramsis_job_size))


def _jellyfish(profile: Profile, s: PlanSettings) -> Plan:
    lo, hi = load_range(profile, s)
    n = max(s.num_loads, 2)
    loads = [round(lo + (hi - lo) * i / (n - 1), 3) for i in range(n)]
    return builders.build_jellyfish_plan(profile, s.slo_s, s.num_workers, loads, s.percentile,
                                         s.max_batch_size)


def _mosel(profile: Profile, s: PlanSettings) -> Plan:
    return builders.build_mosel_plan(profile, s.mosel_max_job_size,
                                     max_batch_size=s.max_batch_size)


def _otas(profile: Profile, s: PlanSettings) -> Plan:
    return builders.build_otas_plan(profile, percentile=s.percentile,
                                    max_batch_size=s.max_batch_size)


_BUILDERS: dict[PlanKind, Callable[[Profile, PlanSettings], Plan]] = {
    PlanKind.RAMSIS: _ramsis, PlanKind.JELLYFISH: _jellyfish, PlanKind.MOSEL: _mosel,
    PlanKind.OTAS: _otas}


def build_plan(kind: PlanKind, profile: Profile, settings: PlanSettings) -> Plan:
    """One plan of `kind` for `profile` (RAMSIS solves MDPs: seconds to minutes)."""
    return _BUILDERS[kind](profile, settings)


def _source(profile_text: str, kind: PlanKind, settings: PlanSettings) -> dict[str, Any]:
    return {"kind": kind.value,
            "profile_sha256": hashlib.sha256(profile_text.encode()).hexdigest()[:24],
            "settings": asdict(settings), "plans_format_version": FORMAT_VERSION}


def _current(path: Path, kind: PlanKind, source: dict[str, Any]) -> bool:
    """The file holds a valid plan of `kind` built from this source."""
    try:
        data = json.loads(path.read_text())
        kind.read(data)
    except (OSError, ValueError):
        return False
    return bool(data.get("source") == source)


def write_plan(path: Path, plan: Plan, source: Mapping[str, Any]) -> Path:
    """The plan's JSON plus its `source`, written atomically (tmp + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({**plan.to_json(), "source": dict(source)}))
    tmp.replace(path)
    return path


def ensure_plans(profile_paths: Mapping[str, Path], plans_dir: Path = DEFAULT_PLANS_DIR,
                 settings: PlanSettings | None = None,
                 kinds: Sequence[PlanKind | str] | None = None,
                 force: bool = False) -> dict[str, Path]:
    """Plans for every profile (the kinds `plan_kinds` picks, or those of `kinds` it supports),
    rebuilt only when missing, invalid or built from another profile or settings. Returns
    `<profile>.<kind>` -> path."""
    settings = settings or PlanSettings()
    wanted_kinds = None if kinds is None else [PlanKind.parse(k) for k in kinds]
    out: dict[str, Path] = {}
    for name, ppath in profile_paths.items():
        text = Path(ppath).read_text()
        profile = Profile.from_dict(json.loads(text))
        supported = plan_kinds(profile)
        wanted = [k for k in supported if wanted_kinds is None or k in wanted_kinds]
        if wanted_kinds is not None and not wanted:
            log.warning("profile %s supports plan kinds %s, none of %s", name,
                        [k.value for k in supported], [k.value for k in wanted_kinds])
        for kind in wanted:
            path = plan_path(plans_dir, name, kind)
            source = _source(text, kind, settings)
            if not force and _current(path, kind, source):
                log.info("plan %s.%s is current: %s", name, kind.value, path)
            else:
                started = time.perf_counter()
                write_plan(path, build_plan(kind, profile, settings), source)
                log.info("plan %s.%s built in %.1f s: %s", name, kind.value,
                         time.perf_counter() - started, path)
            out[f"{name}.{kind.value}"] = path
    return out
