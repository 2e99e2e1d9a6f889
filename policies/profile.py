"""Profiles: accuracy per variant and latency per variant x batch size, plus the latency model.

A profile is plain data (JSON-compatible dicts). `LatencyModel` turns the measured points of one
percentile into a dense, non-decreasing table over batch sizes 1..max_batch_size, so policies can
ask for any batch size without caring which sizes were profiled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policies.types import Variant

PERCENTILES = ("mean", "p50", "p95", "p99")
FORMAT_VERSION = 1


@dataclass(frozen=True)
class LatencyPoint:
    """Measured latency of one (variant, batch size), milliseconds."""

    batch_size: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    num_samples: int = 0

    def get(self, percentile: str) -> float:
        if percentile not in PERCENTILES:
            raise ValueError(f"unknown percentile {percentile!r}; valid: {PERCENTILES}")
        return float(getattr(self, f"{percentile}_ms"))


@dataclass(frozen=True)
class VariantProfile:
    """Accuracy (fraction in [0, 1], measured on held-out data) and latency points of a variant."""

    variant: Variant
    accuracy: float
    latency: tuple[LatencyPoint, ...]

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ValueError(f"{self.variant.name}: accuracy {self.accuracy} not in [0, 1]")
        if not self.latency:
            raise ValueError(f"{self.variant.name}: no latency points")


@dataclass(frozen=True)
class Profile:
    """All variants of one deployment on one kind of hardware."""

    name: str
    hardware: str
    variants: tuple[VariantProfile, ...]
    metadata: dict[str, Any] = field(default_factory=dict)

    def names(self) -> list[str]:
        return [v.variant.name for v in self.variants]

    def by_name(self, name: str) -> VariantProfile:
        for v in self.variants:
            if v.variant.name == name:
                return v
        raise ValueError(f"unknown variant {name!r}; valid: {self.names()}")

    def p50_ms_table(self) -> dict[tuple[str, int], float]:
        """Measured p50 ms per (variant name, batch size), profiled points only."""
        return {(v.variant.name, p.batch_size): p.p50_ms for v in self.variants
                for p in v.latency}

    def subset(self, names: list[str]) -> Profile:
        """The profile restricted to `names`, in that order."""
        return Profile(self.name, self.hardware, tuple(self.by_name(n) for n in names),
                       dict(self.metadata))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "hardware": self.hardware,
            "metadata": self.metadata,
            "variants": [
                {
                    "name": vp.variant.name,
                    "model": vp.variant.model,
                    "modalities": sorted(vp.variant.modalities),
                    "gamma": vp.variant.gamma,
                    "accuracy": vp.accuracy,
                    "latency": [
                        {"batch_size": p.batch_size, "p50_ms": p.p50_ms, "p95_ms": p.p95_ms,
                         "p99_ms": p.p99_ms, "mean_ms": p.mean_ms, "num_samples": p.num_samples}
                        for p in vp.latency
                    ],
                }
                for vp in self.variants
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        version = data.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"profile format_version {version!r} unsupported (want {FORMAT_VERSION})")
        variants = []
        for v in data["variants"]:
            variant = Variant(name=v["name"], model=v.get("model", v["name"]),
                              modalities=frozenset(v.get("modalities", [])),
                              gamma=int(v.get("gamma", 0)))
            points = tuple(sorted((LatencyPoint(**p) for p in v["latency"]),
                                  key=lambda p: p.batch_size))
            variants.append(VariantProfile(variant, float(v["accuracy"]), points))
        return cls(data["name"], data["hardware"], tuple(variants), dict(data.get("metadata", {})))


def _linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares slope and intercept (a single point gives a flat line)."""
    n = len(xs)
    mean_x = sum(xs) / n
    mean_y = sum(ys) / n
    var = sum((x - mean_x) ** 2 for x in xs)
    if var == 0:
        return 0.0, mean_y
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / var
    return slope, mean_y - slope * mean_x


def dense_latency_ms(points: tuple[LatencyPoint, ...], percentile: str,
                     max_batch_size: int) -> list[float]:
    """Latency for batch sizes 1..max_batch_size: measured where profiled, a per-variant linear
    regression on the batch size elsewhere, then a suffix minimum so it never decreases."""
    measured = {p.batch_size: p.get(percentile) for p in points if p.batch_size <= max_batch_size}
    slope, intercept = _linear_fit([float(b) for b in measured], list(measured.values()))
    table = [measured.get(b, slope * b + intercept) for b in range(1, max_batch_size + 1)]
    for i in range(len(table) - 2, -1, -1):
        table[i] = min(table[i], table[i + 1])
    return table


@dataclass(frozen=True)
class LatencyModel:
    """Dense latency tables (seconds) per variant for batch sizes 1..max_batch_size."""

    names: tuple[str, ...]
    accuracy: tuple[float, ...]
    latency_s: tuple[tuple[float, ...], ...]
    max_batch_size: int

    @classmethod
    def from_profile(cls, profile: Profile, percentile: str = "p95",
                     max_batch_size: int | None = None) -> LatencyModel:
        if max_batch_size is None:
            max_batch_size = max(p.batch_size for v in profile.variants for p in v.latency)
        tables = tuple(
            tuple(ms / 1000.0 for ms in dense_latency_ms(v.latency, percentile, max_batch_size))
            for v in profile.variants
        )
        return cls(tuple(profile.names()), tuple(v.accuracy for v in profile.variants),
                   tables, max_batch_size)

    def index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise ValueError(f"unknown variant {name!r}; valid: {list(self.names)}") from None

    def latency(self, variant_index: int, batch_size: int) -> float:
        """Seconds to run `batch_size` on the variant; beyond the table, a least-squares line
        fitted to the whole dense table (as RAMSIS extends its profiles)."""
        table = self.latency_s[variant_index]
        if batch_size < 1:
            raise ValueError(f"batch size must be >= 1, got {batch_size}")
        if batch_size <= len(table):
            return table[batch_size - 1]
        slope, intercept = _linear_fit([float(b) for b in range(1, len(table) + 1)], list(table))
        return max(slope * batch_size + intercept, table[-1])

    def fastest(self) -> int:
        """Index of the variant with the lowest batch-1 latency."""
        return min(range(len(self.names)), key=lambda i: (self.latency_s[i][0], -self.accuracy[i]))

    def most_accurate(self) -> int:
        return max(range(len(self.names)), key=lambda i: (self.accuracy[i], -self.latency_s[i][0]))

    def pareto_indices(self, batch_size: int = 1) -> list[int]:
        """Variants not dominated in (accuracy up, latency at `batch_size` down), by latency."""
        order = sorted(range(len(self.names)),
                       key=lambda i: (self.latency(i, batch_size), -self.accuracy[i]))
        front: list[int] = []
        best = -1.0
        for i in order:
            if self.accuracy[i] > best:
                front.append(i)
                best = self.accuracy[i]
        return front
