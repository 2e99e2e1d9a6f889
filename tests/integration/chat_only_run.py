"""The run behind tests/integration/test_chat_only_app.py, in a process of its own (its own
local Ray, never the session's shared app):

    python -m tests.integration.chat_only_run MODEL_DIR ENGINE MODE OUT.json

An app with `classifiers: []` and a `generation:` section (MODEL_DIR served by ENGINE in MODE)
deployed with `serve.run(build_app(args))`; every route's answer (status and JSON) and the
app's deployments written to OUT."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.helpers.app_process import serve_once, write_record

APP = "adaptserve-chat-only"


def args(model_dir: str, engine: str, mode: str) -> dict[str, Any]:
    return {"classifiers": [], "ensure_artifacts": True,
            "http": {"ray_actor_options": {"num_cpus": 0.1}},
            "generation": {"model_dir": model_dir, "engine": engine, "mode": mode,
                           "engine_settings": ({"max_num_seqs": 4, "kv_cache_gib": 1}
                                               if engine == "vllm" else {}),
                           "llm": {"ray_actor_options": {"num_cpus": 0.5}}}}


def png_url() -> str:
    import base64
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (28, 28), (255, 255, 255)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def answers(url: str) -> dict[str, Any]:
    from bench.core.http import get, post_json

    def seen(resp: Any) -> dict[str, Any]:
        try:
            body = resp.json()
        except ValueError:
            body = resp.text[:500]
        return {"status": resp.status_code, "body": body}

    chat = {"model": "vlm", "max_tokens": 4,
            "messages": [{"role": "user", "content": "what is 2 + 3?"}]}
    image = {**chat, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": png_url()}},
        {"type": "text", "text": "which digit?"}]}]}
    return {"healthz": seen(get(url + "/healthz")),
            "chat_image": seen(post_json(url + "/v1/chat/completions", image, timeout_s=120.0)),
            "models": seen(get(url + "/v1/models")),
            "status": seen(get(url + "/v1/status")),
            "chat": seen(post_json(url + "/v1/chat/completions", chat, timeout_s=120.0)),
            "classify": seen(post_json(url + "/v1/classify",
                                       {"model": "family", "inputs": {"image": "AA=="},
                                        "slo": {"latency_ms": 500}})),
            "metrics": {"status": get(url + "/metrics").status_code}}


def main(model_dir: str, engine: str, mode: str, out: Path) -> int:
    return write_record(serve_once(args(model_dir, engine, mode), APP, answers), out)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
