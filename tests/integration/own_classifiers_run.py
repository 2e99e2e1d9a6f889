"""The run behind tests/integration/test_own_classifiers.py, in a process of its own (its own
local Ray, never the session's shared app):

    python -m tests.integration.own_classifiers_run WORK_DIR OUT.json

A user's own classifiers, built under WORK_DIR as a download looks on disk
(tests/helpers/own_classifiers.py), served through `build_app` with no training:
- `mine`: three timm checkpoints profiled on a labelled folder, chosen among by RAMSIS;
- `named`: a Hugging Face image classifier (its id2label names) and a TorchScript file;
- `imported`: a family by import path (tests/integration/fake_family.py).
Every route's answer (status and JSON), the app's deployments and the biggest pickled argument
any deployment is bound with are written to OUT."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path
from typing import Any

from tests.helpers.app_process import serve_once, write_record

APP = "adaptserve-own-classifiers"


def args(work: Path) -> dict[str, Any]:
    from tests.helpers import own_classifiers as oc

    data = oc.image_folder(work / "data")
    small = {"ray_actor_options": {"num_cpus": 0.2}}
    return {"ensure_artifacts": True,
            "paths": {"profiles_dir": str(work / "profiles"), "plans_dir": str(work / "plans")},
            "http": {"ray_actor_options": {"num_cpus": 0.1}},
            "classifiers": [
                {"name": "mine", "model": {"checkpoints": oc.timm_checkpoints(work / "timm")},
                 "dataset": {"path": str(data)}, "policy": "ramsis", "max_batch_size": 4,
                 "default_slo_ms": 500, "plan": {"max_qps": 20}, **small},
                {"name": "named", "model": {"checkpoints": [
                    {"name": "hf", "format": "hf", "path": str(oc.hf_classifier(work / "hf"))},
                    {"name": "script", "format": "torchscript", "input": {"size": oc.SIDE},
                     "path": str(oc.torchscript_classifier(work / "script.pt"))}]},
                 "dataset": {"path": str(data)}, "policy": "fastest", **small},
                {"name": "imported",
                 "model": {"import_path": "tests.integration.fake_family:FakeFamily"},
                 "policy": "fastest", **small}]}


def image_b64(work: Path) -> str:
    import base64

    return base64.b64encode((work / "data" / "two" / "0.png").read_bytes()).decode()


def largest_bound_arg(app: Any) -> dict[str, Any]:
    """The biggest argument any deployment of `app` is bound with: where, and its pickled size
    (bound applications, the handles, are walked into, not counted)."""
    from ray.serve import Application

    found: dict[str, int] = {}

    def walk(value: Any, where: str) -> None:
        if isinstance(value, Application):
            d = value._bound_deployment
            for i, a in enumerate([*d.init_args, *d.init_kwargs.values()]):
                walk(a, f"{d.name}[{i}]")
        elif isinstance(value, dict) and any(isinstance(v, Application)
                                             for v in value.values()):
            for k, v in value.items():
                walk(v, f"{where}.{k}")
        elif where not in found:
            found[where] = len(pickle.dumps(value))

    walk(app, "app")
    where = max(found, key=found.__getitem__)
    return {"where": where, "bytes": found[where]}


def answers(url: str, work: Path) -> dict[str, Any]:
    from bench.core.http import get, post_json

    def seen(resp: Any) -> dict[str, Any]:
        try:
            body = resp.json()
        except ValueError:
            body = resp.text[:500]
        return {"status": resp.status_code, "body": body}

    def classify(model: str, inputs: dict[str, Any]) -> dict[str, Any]:
        return seen(post_json(url + "/v1/classify", {"model": model, "inputs": inputs,
                                                     "slo": {"latency_ms": 2000}}))

    image = {"image": image_b64(work)}
    return {"healthz": seen(get(url + "/healthz")), "models": seen(get(url + "/v1/models")),
            "mine": [classify("mine", image) for _ in range(4)],
            "named": classify("named", image),
            "imported": classify("imported", {"x": [0.1, 0.9, 0.3]}),
            "bad_image": classify("mine", {"image": "AA=="})}


def main(work: Path, out: Path) -> int:
    record = serve_once(args(work), APP, lambda url: answers(url, work),
                        lambda app: {"largest_arg": largest_bound_arg(app)})
    return write_record(record, out)

if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
