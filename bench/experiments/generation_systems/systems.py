"""The systems the generation benchmark compares, each a server on its own HTTP port, started
fresh in its own process (bench/experiments/generation_systems/serve_process.py, or vLLM's CLI) and stopped after its ramp.

The CPU budget is the same for all: the whole 2-core machine, Ray with `num_cpus` logical CPUs
(2) where Ray runs, and ONE vLLM engine with the same settings (context, max_num_seqs, KV cache,
float32, eager, 8 images). vLLM on CPU binds its worker's compute threads to one core and
reserves the other for its engine loop and front end; everything else of a system (Serve's
proxy and ingress, and in the disaggregated systems the image encoders: 2 replicas of one torch
thread each) shares the same two cores. Disaggregation adds no hardware: it moves the vision
tower out of the engine's core onto the other one, which is the point being measured.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ADAPTSERVE_KINDS = ("monolith", "decoupled", "decoupled+priority", "full")
PEER_KINDS = ("vllm-serve", "ray-serve-llm")
FLOOR_KINDS = ("serve-floor-1hop", "serve-floor-2hop")  # Serve with no model (gen_floor.py)
SYSTEMS = ADAPTSERVE_KINDS + PEER_KINDS  # the figure's (the default run)
ALL_SYSTEMS = SYSTEMS + FLOOR_KINDS
ABLATION = {  # generation: keys of each of our systems (the ablation's steps)
    "monolith": {"mode": "monolith", "routing": "pow2", "priority": "fifo"},
    "decoupled": {"mode": "disaggregated", "routing": "pow2", "priority": "fifo"},
    "decoupled+priority": {"mode": "disaggregated", "routing": "pow2", "priority": "deadline"},
    "full": {"mode": "disaggregated", "routing": "token", "priority": "deadline"},
}
MARKER_ENV = "ADAPTSERVE_GENBENCH_RUN"


@dataclass(frozen=True)
class EngineBudget:
    """What every system's vLLM engine gets (the same for all)."""

    max_model_len: int
    max_images: int = 8
    max_num_seqs: int = 32
    kv_cache_gib: int = 1
    num_cpus: int = 2  # Ray logical CPUs
    llm_replicas: int = 1
    encoder_replicas: int = 2


@dataclass(frozen=True)
class SystemSpec:
    name: str
    port: int
    model_dir: str
    model_name: str
    budget: EngineBudget
    slo_ms: float
    config: str = "serve_config.yaml"  # our systems: the app's args, overridden
    models_dir: str = ".cache/models"  # our systems: where the app finds the trained VLM
    log_dir: str = "results/generation/logs"
    extra_pythonpath: str = ""  # e.g. where pyarrow is, for Ray Serve LLM
    env: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> SystemSpec:
        d = json.loads(text)
        d["budget"] = EngineBudget(**d["budget"])
        return SystemSpec(**d)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def app_args(spec: SystemSpec, base: dict[str, Any]) -> dict[str, Any]:
    """The app's args (serve_config.yaml's) with one idle classifier and `generation:` set
    for one of our systems, serving the very model directory the peers serve."""
    if spec.name not in ABLATION:
        raise ValueError(f"not one of our systems: {spec.name!r}; valid: {list(ABLATION)}")
    b = spec.budget
    args = copy.deepcopy(base)
    args["classifiers"] = args["classifiers"][:1]  # one (idle): the app needs one
    args.setdefault("paths", {})["models_dir"] = str(Path(spec.models_dir).resolve())
    args["generation"] = {
        "model": spec.model_name, "model_dir": spec.model_dir, "engine": "vllm",
        **ABLATION[spec.name],
        "engine_settings": {"max_model_len": b.max_model_len, "max_num_seqs": b.max_num_seqs,
                            "kv_cache_gib": b.kv_cache_gib, "max_images": b.max_images},
        "limits": {"max_images": b.max_images, "default_ttft_slo_ms": spec.slo_ms},
        "llm": {"num_replicas": b.llm_replicas, "ray_actor_options": {"num_cpus": 0.5}},
        "encoder": {"num_replicas": b.encoder_replicas,
                    "ray_actor_options": {"num_cpus": 0.25}},
    }
    return args


def vllm_serve_argv(spec: SystemSpec) -> list[str]:
    b = spec.budget
    return [sys.executable, "-m", "bench.experiments.generation_systems.vllm_cli", "serve", spec.model_dir,
            "--host", "127.0.0.1", "--port", str(spec.port),
            "--served-model-name", spec.model_name, "--max-model-len", str(b.max_model_len),
            "--max-num-seqs", str(b.max_num_seqs), "--dtype", "float32", "--enforce-eager",
            "--limit-mm-per-prompt", json.dumps({"image": b.max_images}),
            "--disable-log-stats"]


def llm_config(spec: SystemSpec) -> dict[str, Any]:
    """Ray Serve LLM's `LLMConfig` fields (CPU settings of ../shared/VLLM_CPU.md)."""
    b = spec.budget
    return {"model_loading_config": {"model_id": spec.model_name, "model_source": spec.model_dir},
            "accelerator_config": {"kind": "cpu"},
            "deployment_config": {"num_replicas": b.llm_replicas,
                                  "ray_actor_options": {"num_cpus": 0}},
            "engine_kwargs": {"max_model_len": b.max_model_len, "max_num_seqs": b.max_num_seqs,
                              "dtype": "float32", "enforce_eager": True,
                              "limit_mm_per_prompt": {"image": b.max_images}},
            "runtime_env": {"env_vars": {"VLLM_CPU_KVCACHE_SPACE": str(b.kv_cache_gib)}}}


def command(spec: SystemSpec) -> list[str]:
    if spec.name == "vllm-serve":
        return vllm_serve_argv(spec)
    return [sys.executable, "-m", "bench.experiments.generation_systems.serve_process", spec.to_json()]


@dataclass
class Running:
    spec: SystemSpec
    proc: subprocess.Popen[bytes]
    token: str
    log_path: Path
    started_s: float


def start(spec: SystemSpec) -> Running:
    """The system's process in a session of its own, its log in `log_dir`; every process it
    starts (Ray's included) inherits a marker, so `stop` finds what is left by pid."""
    token = f"{spec.name}-{os.getpid()}-{time.time_ns()}"
    log_dir = Path(spec.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{spec.name}.log"
    env = {**os.environ, MARKER_ENV: token, "VLLM_CPU_KVCACHE_SPACE": str(spec.budget.kv_cache_gib),
           **spec.env}
    env.pop("RAY_ADDRESS", None)
    if spec.extra_pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""),
                                                         spec.extra_pythonpath) if p)
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command(spec), stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    return Running(spec, proc, token, log_path, time.time())


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, from /proc/<pid>/stat."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), int(fields[19])


def _has_marker(pid: int, needle: bytes) -> bool:
    try:
        return needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False


def tree(root: int, token: str) -> dict[int, int]:
    """{pid: start time} of `root`'s descendants and of every process carrying the run's
    marker (Ray's and vLLM's processes rename themselves, which can blank their environ, so
    the tree is taken while the root is still alive)."""
    stats = {int(e.name): st for e in Path("/proc").iterdir()
             if e.name.isdigit() and (st := _stat(int(e.name))) is not None}
    needle = f"{MARKER_ENV}={token}".encode()
    out = {pid: st[1] for pid, st in stats.items()
           if pid != os.getpid() and _has_marker(pid, needle)}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, started) in stats.items():
            if ppid == parent and pid not in out:
                out[pid] = started
                frontier.append(pid)
    return out


def stop(run: Running, grace_s: float = 60.0) -> dict[str, Any]:
    """SIGTERM (the server shuts Ray/vLLM down), then SIGKILL to whatever of its process tree
    (taken before) or carrying the marker is still there; returns what had to be killed."""
    procs = tree(run.proc.pid, run.token)
    if run.proc.poll() is None:
        run.proc.send_signal(signal.SIGTERM)
        try:
            run.proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            run.proc.kill()
            run.proc.wait(10)
    time.sleep(2.0)
    procs.update(tree(run.proc.pid, run.token))
    left = [pid for pid, started in procs.items()
            if (st := _stat(pid)) is not None and st[1] == started]
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    return {"exit_code": run.proc.returncode, "killed_leftovers": len(left)}


def log_tail(run: Running, chars: int = 3000) -> str:
    try:
        return run.log_path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""
