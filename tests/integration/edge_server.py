"""The app on a private local Ray in a process of its own, with the environment a test gives it
(API keys, ADAPTSERVE_EDGE), which the Serve proxy reads when it starts: the session server of
conftest.py runs open and in the test process, so an edge test starts this one instead.

    python -m tests.integration.edge_server PORT '<app args JSON>'

Serves until SIGTERM, then shuts Serve and Ray down. Prints "ready" once /healthz answers 200.
"""

from __future__ import annotations

import json
import signal
import sys
import threading


def main(port: int, args: dict) -> None:  # type: ignore[type-arg]
    import ray
    from ray import serve

    from app.builder import build_app
    from tests.integration.conftest import _wait_healthy

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ray.init(address="local", num_cpus=2, object_store_memory=256 * 1024 * 1024,
             include_dashboard=False, namespace="adaptserve-edge", log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        serve.run(build_app(args), name="adaptserve-edge", route_prefix="/")
        _wait_healthy(f"http://127.0.0.1:{port}", timeout_s=300.0)
        print("ready", flush=True)
        stop.wait()
    finally:
        serve.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), json.loads(sys.argv[2]))
