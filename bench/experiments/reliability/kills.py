"""The kills of the reliability benchmark (bench/experiments/reliability/phases.py runs them beside the
single requests): a Serve actor's process (a classifier replica, the controller) killed by pid
with SIGKILL, as a crash or the OOM killer would, then the app watched until it is back.

The process is found in this driver's own process tree (bench/core/probe.py: the local Ray
this benchmark started), by its title (`ray::ServeReplica:<app>:<deployment>`). Times are
seconds since the phase's load started (the load generator's clock: its `start_delay_s` after
the phase began), so that the kill and every request's record share one clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any

import aiohttp

from bench.core.probe import serve_memory
from bench.core.serve import APP_NAME

POLL_S = 0.5  # the watch's period
POLL_TIMEOUT_S = 5.0


def replica_pid(deployment: str, app: str = APP_NAME) -> int:
    """The pid of one live replica of `deployment` (the first by pid)."""
    title = f"ServeReplica:{app}:{deployment}"
    pids = sorted(m.pid for m in serve_memory() if m.actor == title)
    if not pids:
        raise RuntimeError(f"no live process of {title} in this driver's Ray")
    return pids[0]


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, Any]:
    """(status, JSON body or None); status 0 when no answer came."""
    try:
        async with session.get(url) as resp:
            text = await resp.read()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, None
    except (aiohttp.ClientError, OSError, TimeoutError):
        return 0, None


def family_state(body: Any, family: str | None) -> str:
    """A family's state in a /healthz body ("" when not given), or the error type of an error
    body; "" for anything else."""
    if not isinstance(body, dict):
        return ""
    if isinstance(body.get("error"), dict):
        return str(body["error"].get("type", ""))
    fam = (body.get("families") or {}).get(family) if family else None
    return str(fam.get("state", "")) if isinstance(fam, dict) else ""


async def watch(url: str, family: str | None, ref: float, until: float) -> list[list[Any]]:
    """[seconds since ref, status, state] of GET `url` every POLL_S until loop time `until`."""
    loop = asyncio.get_running_loop()
    polls: list[list[Any]] = []
    timeout = aiohttp.ClientTimeout(total=POLL_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while loop.time() < until:
            at = loop.time() - ref
            status, body = await _get(session, url)
            polls.append([round(at, 3), status, family_state(body, family)])
            await asyncio.sleep(max(0.0, min(POLL_S, until - loop.time())))
    return polls


async def kill_during_load(base_url: str, deployment: str, at_s: float, phase_s: float,
                           start_delay_s: float, watch_path: str,
                           family: str | None = None) -> dict[str, Any]:
    """Kill one replica of `deployment` `at_s` into the load (which starts `start_delay_s`
    after this is called), then watch `watch_path` until the load's end."""
    loop = asyncio.get_running_loop()
    ref = loop.time() + start_delay_s
    pid = await asyncio.to_thread(replica_pid, deployment)
    await asyncio.sleep(max(0.0, ref + at_s - loop.time()))
    os.kill(pid, signal.SIGKILL)
    kill_s, kill_unix_s = loop.time() - ref, time.time()
    polls = await watch(base_url + watch_path, family, ref, ref + phase_s)
    return {"deployment": deployment, "pid": pid, "kill_s": round(kill_s, 4),
            "kill_unix_s": kill_unix_s, "polls": polls}


async def wait_ok(base_url: str, path: str, body: bytes | None, timeout_s: float,
                  ref_unix_s: float) -> float | None:
    """Poll `path` (POST `body` when given, else GET) every POLL_S until a 200 answers;
    seconds since `ref_unix_s` when it did, None if none within `timeout_s`."""
    timeout = aiohttp.ClientTimeout(total=POLL_TIMEOUT_S)
    headers = {"content-type": "application/json"}
    end = time.time() + timeout_s
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while time.time() < end:
            try:
                method = "POST" if body is not None else "GET"
                async with session.request(method, base_url + path, data=body,
                                           headers=headers) as resp:
                    await resp.read()
                    if resp.status == 200:
                        return time.time() - ref_unix_s
            except (aiohttp.ClientError, OSError, TimeoutError):
                pass
            await asyncio.sleep(POLL_S)
    return None
