"""The run behind tests/integration/test_adapter_apps.py, in a process of its own (its own local
Ray, never the session's shared app):

    python -m tests.integration.adapter_app_run MODEL_DIR ENGINE MODE OUT.json

A chat-only app serving the vision-language directory MODEL_DIR with ENGINE in MODE; a greedy chat
request with two images of different sizes and a text-only one (6 tokens each, ignore_eos),
their answers (status and JSON) and the app's deployments written to OUT."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from tests.helpers.app_process import serve_once, write_record

APP = "adaptserve-adapter"
SIZES = ((60, 100), (300, 200))  # (width, height)
COLOURS = ((200, 10, 10), (10, 200, 30))
TEXT = "which digit is this?"


def args(model_dir: str, engine: str, mode: str) -> dict[str, Any]:
    settings: dict[str, Any] = {"max_model_len": 1024}
    if engine == "vllm":
        settings |= {"max_num_seqs": 4, "kv_cache_gib": 1}
    return {"classifiers": [], "ensure_artifacts": True,
            "http": {"ray_actor_options": {"num_cpus": 0.1}},
            "generation": {"model_dir": model_dir, "engine": engine, "mode": mode,
                           "engine_settings": settings,
                           "encoder": {"ray_actor_options": {"num_cpus": 0.1}},
                           "llm": {"ray_actor_options": {"num_cpus": 0.5}}}}


def pictures() -> list[Any]:
    from PIL import Image

    return [Image.new("RGB", size, colour) for size, colour in zip(SIZES, COLOURS, strict=True)]


def png_url(image: Any) -> str:
    import base64
    import io

    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def answers(url: str) -> dict[str, Any]:
    from bench.core.http import post_json

    def seen(body: dict[str, Any]) -> dict[str, Any]:
        resp = post_json(url + "/v1/chat/completions", body, timeout_s=120.0)
        try:
            return {"status": resp.status_code, "body": resp.json()}
        except ValueError:
            return {"status": resp.status_code, "body": resp.text[:500]}

    parts = [{"type": "image_url", "image_url": {"url": png_url(p)}} for p in pictures()]
    greedy = {"model": "vlm", "max_tokens": 6, "ignore_eos": True, "temperature": 0}
    return {"images": seen({**greedy, "messages": [{"role": "user", "content": [
                *parts, {"type": "text", "text": TEXT}]}]}),
            "text": seen({**greedy, "messages": [{"role": "user", "content": TEXT}]})}


def main(model_dir: str, engine: str, mode: str, out: Path) -> int:
    return write_record(serve_once(args(model_dir, engine, mode), APP, answers), out)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])))
