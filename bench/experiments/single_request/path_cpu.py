"""The serving path's CPU per request, beside Serve's no-model floor and the FastAPI + torch
floor (pure: no I/O).

A run's CPU per call comes from the live session (`cpu_ms_per_call`: every Serve process, the
load generator "driver" and the whole "machine"). The server's CPU per call is the machine's
less the load generator's (Ray's own processes count: every Serve app pays them); the path's is
that less the model's compute per call, read from the answers (each answer's batch compute over
its batch size). The compute is wall time on the model's thread, so where the CPU is contended
it slightly overstates the model and understates the path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.sim.replica.request_metrics import RequestRecord

NOT_SERVE = ("driver", "machine")  # cpu_ms_per_call's entries that are not Serve processes
PATH_TARGET = 1.25  # the app's path at most this times Serve's floor (issue: degrade where users stand)


@dataclass(frozen=True)
class PathCpu:
    """CPU ms per call of one run (a call: one request sent, answered or refused)."""

    run: str
    offered_qps: float
    server_ms: float  # the machine's CPU per call less the load generator's
    serve_ms: float  # the Serve processes' (proxy, ingress, replicas, controllers), summed
    model_ms: float  # the model's compute per call

    @property
    def path_ms(self) -> float:
        return self.server_ms - self.model_ms

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "path_ms": self.path_ms}


def model_ms_per_call(records: Sequence[RequestRecord]) -> float:
    """The model's compute per call: each ok answer's share of its batch's compute, summed,
    over every call of the run."""
    if not records:
        return 0.0
    share = sum(r.compute_ms / max(r.batch_size or 1, 1) for r in records
                if r.outcome == "ok" and r.compute_ms is not None)
    return share / len(records)


def path_cpu(run: str, offered_qps: float, cpu_ms: Mapping[str, float],
             records: Sequence[RequestRecord]) -> PathCpu:
    """The run's CPU per call from its `cpu_ms_per_call` entry and its records."""
    server = cpu_ms.get("machine", 0.0) - cpu_ms.get("driver", 0.0)
    serve = sum(v for k, v in cpu_ms.items() if k not in NOT_SERVE)
    return PathCpu(run, offered_qps, server, serve, model_ms_per_call(records))


def path_figures(cpus: Mapping[str, PathCpu]) -> dict[str, Any]:
    """The app's path over Serve's floor at the same offered rate (`app_1x` beside
    `serve_floor_at_app_1x`), and over the FastAPI + torch server's path at its capacity;
    None where a run is missing."""
    app, floor = cpus.get("app_1x"), cpus.get("serve_floor_at_app_1x")
    torch = cpus.get("torch_capacity")
    over_floor = app.path_ms / floor.path_ms if app and floor and floor.path_ms > 0 else None
    over_torch = app.path_ms / torch.path_ms if app and torch and torch.path_ms > 0 else None
    return {"runs": {k: v.to_dict() for k, v in cpus.items()},
            "path_over_serve_floor": over_floor, "path_over_torch": over_torch,
            "path_target": PATH_TARGET,
            "path_within_target": None if over_floor is None else over_floor <= PATH_TARGET}


def path_lines(figures: Mapping[str, Any]) -> list[str]:
    """The report's lines for the figures above."""
    lines = ["CPU ms per call (server = machine - load generator; path = server - model):"]
    for name, c in figures["runs"].items():
        lines.append(f"  {name:<24} at {c['offered_qps']:>6.1f} req/s: server "
                     f"{c['server_ms']:6.2f}, Serve processes {c['serve_ms']:6.2f}, model "
                     f"{c['model_ms']:6.2f}, path {c['path_ms']:6.2f}")

    def num(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}x"

    lines.append(f"  the app's path / Serve's floor at the same rate: "
                 f"{num(figures['path_over_serve_floor'])} (target <= {PATH_TARGET:g}x); / "
                 f"the FastAPI + torch server's path: {num(figures['path_over_torch'])}")
    return lines
