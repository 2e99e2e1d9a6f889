"""Plans as frozen values, one class per kind; JSON only at the file boundary.

| class             | JSON `kind`        | built by (plans.py)                        | run by                 |
|-------------------|--------------------|--------------------------------------------|------------------------|
| RamsisPolicySet   | ramsis_policy_set  | build_ramsis_plan                          | ramsis                 |
| RamsisTable       | ramsis_table       | RamsisTable(table) (the controller's pick) | ramsis (update_plan)   |
| LoadGranularPlan  | load_granular      | build_jellyfish_plan, load_granular_plan   | jellyfish, modelswitch |
| MoselPlan         | mosel_matrix       | build_mosel_plan                           | mosel, all_modalities  |
| OtasPlan          | otas_rate_table    | build_otas_plan                            | otas, fixed_gamma      |

`PlanKind` names the plan *files* a deployment's scheduler reads (`<model>.<task>.<kind>.json`)
and the class such a file holds. `plan_id` is a hash of the content (the plan is its own
version); a stored `plan_id` is not trusted, and `source` (the provenance profiling/plans.py
stamps on plan files) is not part of the plan. The JSON formats are in docs/schedulers.md.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cached_property
from typing import Any, ClassVar, Self

from policies.model_selection.mdp_spec import LoadBalancing, Reward
from policies.model_selection.table import PolicyTable
from policies.profile import PERCENTILES
from policies.schedulers.plan_json import (
    JsonObject,
    as_float,
    batching_from_json,
    batching_json,
    cells_from_json,
    cells_json,
    rate_table_from_json,
    rate_table_json,
    table_from_json,
)
from policies.tokens.api import BatchingParams, RateTable, SwitchRule

FORMAT_VERSION = 1
MoselCell = tuple[tuple[str, int], ...]  # (variant name, batch size) in execution order


class Plan:
    """Base of the plan classes (each a frozen dataclass with a `KIND`)."""

    KIND: ClassVar[str]

    def body(self) -> dict[str, Any]:
        """The JSON fields besides kind, format_version and plan_id."""
        raise NotImplementedError

    @classmethod
    def read(cls, obj: JsonObject) -> Self:
        """The plan from its JSON fields (kind and version already checked)."""
        raise NotImplementedError

    @cached_property
    def plan_id(self) -> str:
        head = {"kind": self.KIND, "format_version": FORMAT_VERSION, **self.body()}
        return hashlib.sha256(json.dumps(head, sort_keys=True).encode()).hexdigest()[:12]

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.KIND, "format_version": FORMAT_VERSION, **self.body(),
                "plan_id": self.plan_id}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """Validate every field; a ValueError names the first bad one."""
        obj = JsonObject(data, cls.KIND)
        obj.expect("kind", cls.KIND)
        obj.expect("format_version", FORMAT_VERSION)
        obj.skip("plan_id", "source")
        plan = cls.read(obj)
        obj.done()
        return plan


@dataclass(frozen=True)
class RamsisPolicySet(Plan):
    """One solved RAMSIS policy table per anticipated deployment load (over `num_workers`)."""

    KIND: ClassVar[str] = "ramsis_policy_set"
    profile: str
    slo_s: float
    num_workers: int
    percentile: str
    max_batch_size: int
    max_queue: int
    reward: Reward
    job_size: int
    balancing: LoadBalancing
    tables: tuple[PolicyTable, ...]

    def body(self) -> dict[str, Any]:
        return {"profile": self.profile, "slo_s": float(self.slo_s),
                "num_workers": self.num_workers, "load_scope": "deployment",
                "percentile": self.percentile, "max_batch_size": self.max_batch_size,
                "max_queue": self.max_queue, "reward": self.reward.value,
                "job_size": self.job_size, "balancing": self.balancing.value,
                "tables": [t.to_dict() for t in self.tables]}

    @classmethod
    def read(cls, obj: JsonObject) -> Self:
        obj.expect("load_scope", "deployment")
        tables = tuple(table_from_json(t, f"{obj.where}.tables[{i}]")
                       for i, t in enumerate(obj.get_list("tables")))
        if not tables:
            raise ValueError(f"{obj.where}.tables: empty")
        return cls(obj.get_str("profile"), obj.get_float("slo_s"), obj.get_int("num_workers"),
                   obj.get_choice("percentile", PERCENTILES), obj.get_int("max_batch_size"), obj.get_int("max_queue"),
                   Reward(obj.get_str("reward")), obj.get_int("job_size"),
                   LoadBalancing(obj.get_str("balancing")), tables)


@dataclass(frozen=True)
class RamsisTable(Plan):
    """One table the controller selected for the deployment load: pins a RAMSIS scheduler."""

    KIND: ClassVar[str] = "ramsis_table"
    table: PolicyTable

    def body(self) -> dict[str, Any]:
        return {"table": self.table.to_dict()}

    @classmethod
    def read(cls, obj: JsonObject) -> Self:
        return cls(table_from_json(obj.get_object("table").data, f"{obj.where}.table"))


@dataclass(frozen=True)
class LoadChoice:
    """Run `variant` with batches of at most `max_batch_size` up to `load_qps`."""

    load_qps: float
    variant: str
    max_batch_size: int


@dataclass(frozen=True)
class LoadGranularPlan(Plan):
    """Jellyfish+ / ModelSwitching: one (variant, batch cap) per anticipated deployment load."""

    KIND: ClassVar[str] = "load_granular"
    policy: str
    slo_s: float
    num_workers: int
    percentile: str
    max_batch_size: int
    choices: tuple[LoadChoice, ...]

    def body(self) -> dict[str, Any]:
        return {"policy": self.policy, "slo_s": float(self.slo_s),
                "num_workers": self.num_workers, "load_scope": "deployment",
                "percentile": self.percentile, "max_batch_size": self.max_batch_size,
                "choices": [{"load_qps": float(c.load_qps), "variant": c.variant,
                             "max_batch_size": c.max_batch_size} for c in self.choices]}

    @classmethod
    def read(cls, obj: JsonObject) -> Self:
        obj.expect("load_scope", "deployment")
        choices = []
        for i, raw in enumerate(obj.get_list("choices")):
            c = JsonObject(raw, f"{obj.where}.choices[{i}]")
            choices.append(LoadChoice(c.get_float("load_qps"), c.get_str("variant"),
                                      c.get_int("max_batch_size")))
            c.done()
        if not choices:
            raise ValueError(f"{obj.where}.choices: empty")
        return cls(obj.get_str("policy"), obj.get_float("slo_s"), obj.get_int("num_workers"),
                   obj.get_choice("percentile", PERCENTILES), obj.get_int("max_batch_size"), tuple(choices))


@dataclass(frozen=True)
class MoselPlan(Plan):
    """MOSEL's strategy matrix: `cells[n-1][level]` is the least-latency strategy for a job of n
    items reaching `accuracy_levels[level]` (None: none reaches it)."""

    KIND: ClassVar[str] = "mosel_matrix"
    profile: str
    percentile: str
    max_batch_size: int
    max_job_size: int
    solver: str
    variant_names: tuple[str, ...]
    all_modalities_variant: str
    accuracy_levels: tuple[float, ...]
    cells: tuple[tuple[MoselCell | None, ...], ...]

    def __post_init__(self) -> None:
        if self.all_modalities_variant not in self.variant_names:
            raise ValueError(f"all_modalities_variant {self.all_modalities_variant!r} not in "
                             f"{list(self.variant_names)}")
        if len(self.cells) != self.max_job_size or any(
                len(row) != len(self.accuracy_levels) for row in self.cells):
            raise ValueError(f"cells must be {self.max_job_size} rows of "
                             f"{len(self.accuracy_levels)} (job sizes x accuracy levels)")

    def body(self) -> dict[str, Any]:
        return {"profile": self.profile, "percentile": self.percentile,
                "max_batch_size": self.max_batch_size, "max_job_size": self.max_job_size,
                "solver": self.solver, "variant_names": list(self.variant_names),
                "all_modalities_variant": self.all_modalities_variant,
                "accuracy_levels": [float(a) for a in self.accuracy_levels],
                "cells": cells_json(self.cells)}

    @classmethod
    def read(cls, obj: JsonObject) -> Self:
        names = tuple(str(n) for n in obj.get_list("variant_names"))
        levels = tuple(as_float(a, f"{obj.where}.accuracy_levels")
                       for a in obj.get_list("accuracy_levels"))
        cells = cells_from_json(obj.get_list("cells"), names, f"{obj.where}.cells")
        return cls(obj.get_str("profile"), obj.get_choice("percentile", PERCENTILES), obj.get_int("max_batch_size"),
                   obj.get_int("max_job_size"), obj.get_str("solver"), names,
                   obj.get_str("all_modalities_variant"), levels, cells)


@dataclass(frozen=True)
class OtasPlan(Plan):
    """OTAS's per-replica rate table f(q) -> gamma, Algorithm 1's batching thresholds, the
    switch rule to the dynamic program and kappa."""

    KIND: ClassVar[str] = "otas_rate_table"
    profile: str
    percentile: str
    max_batch_size: int
    rate_table: RateTable
    batching: BatchingParams
    switch: SwitchRule
    kappa: float
    allocator: str

    def body(self) -> dict[str, Any]:
        return {"profile": self.profile, "percentile": self.percentile,
                "max_batch_size": self.max_batch_size, "load_scope": "replica",
                "rate_table": rate_table_json(self.rate_table),
                "batching": batching_json(self.batching),
                "switch": {"beta": self.switch.beta,
                           "initial_stage_s": float(self.switch.initial_stage_s)},
                "kappa": float(self.kappa), "allocator": self.allocator}

    @classmethod
    def read(cls, obj: JsonObject) -> Self:
        obj.expect("load_scope", "replica")
        switch = obj.get_object("switch")
        rule = SwitchRule(switch.get_int("beta"), switch.get_float("initial_stage_s"))
        switch.done()
        return cls(obj.get_str("profile"), obj.get_choice("percentile", PERCENTILES), obj.get_int("max_batch_size"),
                   rate_table_from_json(obj.get_list("rate_table"), f"{obj.where}.rate_table"),
                   batching_from_json(obj.get_object("batching")), rule,
                   obj.get_float("kappa"), obj.get_str("allocator"))


PLAN_TYPES: dict[str, type[Plan]] = {cls.KIND: cls for cls in (
    RamsisPolicySet, RamsisTable, LoadGranularPlan, MoselPlan, OtasPlan)}


class PlanKind(Enum):
    """The plan files (`<model>.<task>.<kind>.json`) and the plan class each holds."""

    RAMSIS = "ramsis"
    JELLYFISH = "jellyfish"
    MOSEL = "mosel"
    OTAS = "otas"

    @classmethod
    def parse(cls, value: str | PlanKind) -> PlanKind:
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown plan kind {value!r}; "
                             f"valid: {[k.value for k in cls]}") from None

    @property
    def plan_type(self) -> type[Plan]:
        return {PlanKind.RAMSIS: RamsisPolicySet, PlanKind.JELLYFISH: LoadGranularPlan,
                PlanKind.MOSEL: MoselPlan, PlanKind.OTAS: OtasPlan}[self]

    def read(self, data: Mapping[str, Any]) -> Plan:
        """The plan a file of this kind holds (ValueError when it holds anything else)."""
        return self.plan_type.from_json(data)


def plan_from_json(data: Mapping[str, Any]) -> Plan:
    """Any plan, by its `kind` field."""
    kind = data.get("kind") if isinstance(data, Mapping) else None
    cls = PLAN_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ValueError(f"unknown plan kind {kind!r}; valid: {sorted(PLAN_TYPES)}")
    return cls.from_json(data)

