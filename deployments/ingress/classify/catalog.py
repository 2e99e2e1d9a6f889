"""What the ingress knows about each served family: tasks, modalities, variants and their
profiled accuracy and latency (built once from the models and profile files at build time)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from policies.profile import LatencyModel, Profile
from policies.schedulers.registry import degrades


@dataclass(frozen=True)
class VariantInfo:
    name: str
    model: str
    modalities: tuple[str, ...]
    gamma: int
    accuracy: float
    latency_ms: float  # batch of one, at the family's planning percentile
    latency_ms_by_batch: dict[int, float]


@dataclass(frozen=True)
class TaskInfo:
    task: str
    variants: tuple[VariantInfo, ...]

    def fastest(self) -> VariantInfo:
        return min(self.variants, key=lambda v: (v.latency_ms, -v.accuracy))

    def most_accurate(self) -> VariantInfo:
        return max(self.variants, key=lambda v: (v.accuracy, -v.latency_ms))


@dataclass(frozen=True)
class FamilyInfo:
    name: str
    modalities: tuple[str, ...]
    tasks: tuple[TaskInfo, ...]
    policy: str
    percentile: str
    degrades: bool = False  # its policy trades accuracy for time and has variants to trade

    @property
    def default_task(self) -> str:
        return self.tasks[0].task

    def task(self, name: str) -> TaskInfo | None:
        return next((t for t in self.tasks if t.task == name), None)

    def task_names(self) -> list[str]:
        return [t.task for t in self.tasks]


@dataclass(frozen=True)
class Catalog:
    families: tuple[FamilyInfo, ...]

    def get(self, name: str) -> FamilyInfo | None:
        return next((f for f in self.families if f.name == name), None)

    def names(self) -> list[str]:
        return [f.name for f in self.families]

    def to_json(self) -> dict[str, Any]:
        return {"models": [_family_json(f) for f in self.families]}


def _family_json(f: FamilyInfo) -> dict[str, Any]:
    return {
        "name": f.name, "modalities": list(f.modalities), "default_task": f.default_task,
        "policy": f.policy, "degrades": f.degrades, "latency_percentile": f.percentile,
        "tasks": [{
            "task": t.task,
            "fastest_latency_ms": round(t.fastest().latency_ms, 3),
            "variants": [{
                "name": v.name, "model": v.model, "modalities": list(v.modalities),
                "gamma": v.gamma, "accuracy": round(v.accuracy, 4),
                "latency_ms": round(v.latency_ms, 3),
                "latency_ms_by_batch": {str(b): round(ms, 3)
                                        for b, ms in sorted(v.latency_ms_by_batch.items())},
            } for v in t.variants],
        } for t in f.tasks],
    }


def task_info(task: str, profile: Profile, percentile: str, max_batch_size: int) -> TaskInfo:
    model = LatencyModel.from_profile(profile, percentile, max_batch_size)
    measured = sorted({p.batch_size for v in profile.variants for p in v.latency
                       if p.batch_size <= max_batch_size} | {1})
    variants = tuple(
        VariantInfo(name=vp.variant.name, model=vp.variant.model,
                    modalities=tuple(sorted(vp.variant.modalities)), gamma=vp.variant.gamma,
                    accuracy=vp.accuracy, latency_ms=model.latency(i, 1) * 1000.0,
                    latency_ms_by_batch={b: model.latency(i, b) * 1000.0 for b in measured})
        for i, vp in enumerate(profile.variants))
    return TaskInfo(task, variants)


def family_info(name: str, modalities: tuple[str, ...], profiles: dict[str, Profile],
                policy: str, percentile: str, max_batch_size: int) -> FamilyInfo:
    """`profiles` maps task -> profile, in the family's task order (first = default)."""
    tasks = tuple(task_info(t, p, percentile, max_batch_size) for t, p in profiles.items())
    can_trade = any(len(t.variants) > 1 for t in tasks)
    return FamilyInfo(name, modalities, tasks, policy, percentile,
                      degrades=can_trade and degrades(policy))

