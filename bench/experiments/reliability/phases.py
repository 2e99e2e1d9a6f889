"""The phases of the reliability benchmark (bench/experiments/reliability/run.py runs them in ALL_PHASES's
order): each one the single requests to every family (Poisson, `single_qps` each, each at its
default SLO) beside one attack, a kill, or nothing (quiet); the soak is its own load.

- quiet: the baseline; slowloris, slow_headers, chunked: bench/workloads/hostile_clients.py;
- kill_classifier: one replica of `kill_family`'s classifier killed by pid `kill_at_s` into the
  load (bench/experiments/reliability/kills.py), /healthz watched; after the load, that family probed
  until it answers 200 again (the time to recover when the load did not see it);
- kill_controller: the controller's process killed the same way, /v1/status watched, then
  probed until it answers 200;
- soak: `soak_s` of single requests to one family at `soak_load` x its measured capacity.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from app.sim.traces.spec import TraceSpec
from bench.core.client import LoadgenConfig, Payload, run_load_async
from bench.experiments.reliability.kills import kill_during_load, wait_ok
from bench.experiments.reliability.settings import ReliabilitySettings
from bench.workloads.hostile_clients import chunked_upload, slow_headers, slowloris

HOST = "127.0.0.1"
START_DELAY_S = LoadgenConfig.start_delay_s  # the load generator's, before its first send


@dataclass(frozen=True)
class PhaseContext:
    s: ReliabilitySettings
    slo_ms: dict[str, float]  # each family's default SLO
    payloads: dict[str, list[Payload]]
    read_timeout_s: float  # the edge's body read timeout


def single_configs(s: ReliabilitySettings, slo_ms: dict[str, float], duration_s: float,
                   seed: int) -> list[LoadgenConfig]:
    return [LoadgenConfig(url=s.base_url, model=f, slo_ms=slo_ms[f], timeout_s=20.0,
                          trace=TraceSpec("poisson", s.single_qps, duration_s, seed=seed + i),
                          start_delay_s=START_DELAY_S)
            for i, f in enumerate(s.families)]


async def run_phase(c: PhaseContext, name: str, duration_s: float, seed: int,
                    attack: Awaitable[Any] | None = None,
                    cfgs: list[LoadgenConfig] | None = None) -> dict[str, Any]:
    """The phase's single requests (records per family; `cfgs`: other loads instead) beside
    `attack` (its result: `extra`). `load_start_s`: the unix time the records' clock starts."""
    cfgs = cfgs or single_configs(c.s, c.slo_ms, duration_s, seed)
    start_s = time.time()
    loads = [run_load_async(cfg, c.payloads[cfg.model]) for cfg in cfgs]
    *results, extra = await asyncio.gather(*loads, attack or asyncio.sleep(0))
    return {"name": name, "start_s": start_s, "load_start_s": start_s + START_DELAY_S,
            "end_s": time.time(), "single_s": duration_s,
            "singles": {cfg.model: [r.to_dict() for r in res.records]
                        for cfg, res in zip(cfgs, results, strict=True)},
            "max_send_lag_ms": max(res.summary.max_send_lag_ms for res in results),
            "extra": extra}


async def quiet(c: PhaseContext, seed: int) -> dict[str, Any]:
    return await run_phase(c, "quiet", c.s.phase_s, seed)


async def slowloris_phase(c: PhaseContext, seed: int) -> dict[str, Any]:
    s = c.s
    attack = slowloris(HOST, s.port, "/v1/classify", s.slow_clients, s.slow_length,
                       s.slow_period_s, c.read_timeout_s + 15.0)
    p = await run_phase(c, "slowloris", max(s.phase_s, c.read_timeout_s + 10.0), seed, attack)
    p["slow_clients"] = [a.to_dict() for a in p.pop("extra")]
    return p


async def slow_headers_phase(c: PhaseContext, seed: int) -> dict[str, Any]:
    s = c.s
    attack = slow_headers(HOST, s.port, "/v1/classify", s.slow_header_clients, s.slow_period_s,
                          s.slow_header_s)
    p = await run_phase(c, "slow_headers", s.slow_header_s, seed, attack)
    p["slow_header_clients"] = [a.to_dict() for a in p.pop("extra")]
    return p


async def chunked(c: PhaseContext, seed: int) -> dict[str, Any]:
    s = c.s
    upload = chunked_upload(HOST, s.port, "/v1/jobs", int(s.chunked_mb * 1e6), s.chunk_bytes,
                            60.0)
    p = await run_phase(c, "chunked", s.phase_s, seed, upload)
    p["upload"] = p.pop("extra").to_dict()
    return p


async def kill_classifier(c: PhaseContext, seed: int) -> dict[str, Any]:
    """The kill, then (after the load) the family probed with a real request until a 200."""
    s, family = c.s, c.s.kill_family
    attack = kill_during_load(s.base_url, f"Classifier_{family}", s.kill_at_s, s.kill_s,
                              START_DELAY_S, "/healthz", family)
    p = await run_phase(c, "kill_classifier", s.kill_s, seed, attack)
    kill = p.pop("extra")
    kill["family"] = family
    kill["probe_ok_after_kill_s"] = await wait_ok(
        s.base_url, "/v1/classify", c.payloads[family][0].body, s.recover_wait_s,
        kill["kill_unix_s"])
    p["kill"] = kill
    return p


async def kill_controller(c: PhaseContext, seed: int) -> dict[str, Any]:
    """The kill, then (after the load) /v1/status (the controller's) probed until a 200."""
    s = c.s
    attack = kill_during_load(s.base_url, "Controller", s.kill_at_s, s.kill_s, START_DELAY_S,
                              "/v1/status")
    p = await run_phase(c, "kill_controller", s.kill_s, seed, attack)
    kill = p.pop("extra")
    kill["probe_ok_after_kill_s"] = await wait_ok(s.base_url, "/v1/status", None,
                                                  s.recover_wait_s, kill["kill_unix_s"])
    p["kill"] = kill
    return p


def _front(s: ReliabilitySettings) -> dict[str, Any] | None:
    """The front benchmark's JSON, where the soak reads its capacity (None: not needed)."""
    if s.soak_qps is not None and s.soak_family is not None:
        return None
    if not s.front_figures.exists():
        return None
    from bench.core.result import read_result

    return read_result(s.front_figures)["data"]  # a Result, or a bare record from before


def soak_family(s: ReliabilitySettings) -> str:
    front = _front(s)
    return s.soak_family or (str(front["settings"]["family"]) if front else "family")


def soak_target(s: ReliabilitySettings, front: dict[str, Any] | None) -> dict[str, Any]:
    """The soak's family and rate: `soak_qps` when given, else `soak_load` x the capacity the
    front benchmark measured (its JSON: `front`) for the family it measured."""
    family = s.soak_family or (str(front["settings"]["family"]) if front else "family")
    if s.soak_qps is not None:
        return {"family": family, "qps": s.soak_qps, "capacity_qps": None, "source": "--soak-qps"}
    if front is None:
        raise ValueError("the soak needs --soak-qps or the front benchmark's JSON")
    cap = float(front["app"]["capacity"]["qps"])
    return {"family": family, "qps": s.soak_load * cap, "capacity_qps": cap,
            "source": str(s.front_figures), "front_slo_ms": front["settings"].get("slo_ms")}


async def soak(c: PhaseContext, seed: int) -> dict[str, Any]:
    s = c.s
    target = soak_target(s, _front(s))
    cfg = LoadgenConfig(url=s.base_url, model=target["family"],
                        slo_ms=c.slo_ms[target["family"]], timeout_s=20.0,
                        trace=TraceSpec("poisson", target["qps"], s.soak_s, seed=seed),
                        start_delay_s=START_DELAY_S)
    p = await run_phase(c, "soak", s.soak_s, seed, cfgs=[cfg])
    p.pop("extra")
    p["soak"] = {**target, "warmup_s": s.soak_warmup_s, "window_s": s.soak_window_s}
    return p


Runner = Callable[[PhaseContext, int], Awaitable[dict[str, Any]]]
RUNNERS: dict[str, Runner] = {
    "quiet": quiet, "slowloris": slowloris_phase, "slow_headers": slow_headers_phase,
    "chunked": chunked, "kill_classifier": kill_classifier, "kill_controller": kill_controller,
    "soak": soak}


def runner(name: str) -> Runner:
    try:
        return RUNNERS[name]
    except KeyError:
        raise ValueError(f"unknown phase {name!r}; valid: {sorted(RUNNERS)}") from None
