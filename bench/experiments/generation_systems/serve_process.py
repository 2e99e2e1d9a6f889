"""One Ray-based system of the generation benchmark, in a process of its own:

    python -m bench.experiments.generation_systems.serve_process SPEC_JSON      (bench/experiments/generation_systems/systems.py writes SPEC_JSON)

A fresh local Ray (never another cluster; session files under /tmp/genbench/<system>) and
Serve on the spec's port, then our app (serve_config.yaml's args with `generation:` set),
Ray Serve LLM (`build_openai_app`) or Serve's floor (bench/experiments/generation_systems/serve_floor.py, no model); it
prints READY and serves until SIGTERM, then shuts Serve and Ray down. The driver probes
readiness over HTTP itself.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.core import serve as lb
from bench.experiments.generation_systems.serve_floor import deploy as deploy_floor
from bench.experiments.generation_systems.systems import (
    ABLATION,
    FLOOR_KINDS,
    SystemSpec,
    app_args,
    llm_config,
)

log = logging.getLogger(__name__)
TEMP_ROOT = Path("/tmp/genbench")


def deploy_ours(spec: SystemSpec) -> float:
    args = app_args(spec, lb.serve_args(Path(spec.config)))
    return lb.deploy_app(args, spec.base_url)


def deploy_ray_llm(spec: SystemSpec) -> float:
    import pyarrow  # noqa: F401  (Ray Serve LLM needs it; ray[serve] does not bring it)
    from ray import serve
    from ray.serve.llm import LLMConfig, build_openai_app

    t = time.perf_counter()
    app = build_openai_app({"llm_configs": [LLMConfig(**llm_config(spec))]})
    serve.run(app, name="ray_llm", route_prefix="/", blocking=False)
    lb.wait_healthy(spec.base_url + "/v1/models", timeout_s=600.0)
    return time.perf_counter() - t


def serve_until_term(spec: SystemSpec) -> int:
    stop = threading.Event()
    temp = TEMP_ROOT / spec.name.replace("+", "_")
    temp.mkdir(parents=True, exist_ok=True)
    lb.start_ray(spec.port, spec.budget.num_cpus, temp_dir=str(temp))
    # after ray.init, whose core worker installs a SIGTERM handler that aborts the driver
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        took = (deploy_ours(spec) if spec.name in ABLATION
                else deploy_floor(spec.name, spec.model_name, spec.base_url)
                if spec.name in FLOOR_KINDS else deploy_ray_llm(spec))
        print(f"READY {spec.name} deployed in {took:.1f} s (Ray session files in {temp})",
              flush=True)
        while not stop.wait(1.0):
            pass
    finally:
        print(f"stopping {spec.name}", flush=True)
        lb.stop_ray()
    return 0


def main(argv: list[str] | None = None) -> int:
    args: Any = sys.argv[1:] if argv is None else argv
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    return serve_until_term(SystemSpec.from_json(args[0]))


if __name__ == "__main__":
    sys.exit(main())
